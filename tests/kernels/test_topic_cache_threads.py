"""The accumulator's last-topic pointer and its metadata version (RecordAccumulator._topic_info)
under threads, on both implementations: writers send to three topics in turn (each send finds
another topic than the last one kept) while another thread's metadata updates grow the topics;
every record comes back exactly once, byte-exact, in its own topic, in order per partition."""
import threading

from kafka.record import MemoryRecords

from pyprod import config
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.producer import send_settings
from tests.harness.fake_metadata import ListenedVersion

from test_record_accumulator import accumulator

TOPICS = ("a", "b", "c")
WRITERS, RECORDS, UPDATES = 4, 3000, 50


def _cluster(partitions):
    parts = {t: {i: PartitionInfo(t, i, 0, 0, [0], [0], []) for i in range(partitions)}
             for t in TOPICS}
    return Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, parts)


class _Metadata(ListenedVersion):
    def __init__(self):
        self.cluster, self.version = _cluster(2), 1

    def grow(self, partitions):  # what Metadata.update does: the cluster, then the listener
        self.cluster = _cluster(partitions)
        self.version += 1


def test_topics_in_turn_from_threads_while_metadata_grows(k):
    meta = _Metadata()
    cfg = config.build(batch_size=4096, linger_ms=0)
    acc = accumulator(k, cfg, meta)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **send_settings(cfg))
    start = threading.Barrier(WRITERS + 1)
    errors = []

    def write(t):
        start.wait()
        try:
            for i in range(RECORDS):
                topic = TOPICS[(i + t) % len(TOPICS)]
                sp.send(topic, b"%s-%d-%06d" % (topic.encode(), t, i), key=b"k%d" % (i % 7),
                        timestamp_ms=1_700_000_000_000 + i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def update():
        start.wait()
        for n in range(UPDATES):
            meta.grow(2 + n % 4)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(WRITERS)]
    threads.append(threading.Thread(target=update))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors

    acc.begin_flush()
    got = {}  # (topic, partition) -> values in offset order
    cluster = _cluster(8)
    while acc.has_undrained():
        for batches in acc.drain(cluster, {0}, 1 << 22, 10**12).values():
            for b in batches:
                tp = b.topic_partition
                recs = MemoryRecords(bytes(b.payload))
                while recs.has_next():
                    got.setdefault((tp.topic, tp.partition), []).extend(
                        r.value for r in recs.next_batch())
                acc.complete(b, base_offset=0)
    values = [v for vs in got.values() for v in vs]
    want = {b"%s-%d-%06d" % (topic.encode(), t, i) for t in range(WRITERS)
            for i in range(RECORDS) for topic in [TOPICS[(i + t) % len(TOPICS)]]}
    assert len(values) == len(want) == set(values).__len__() and set(values) == want
    for (topic, _), vs in got.items():
        assert all(v.startswith(topic.encode() + b"-") for v in vs)
        for t in range(WRITERS):  # one writer's records keep their order in a partition
            mine = [v for v in vs if v.split(b"-")[1] == b"%d" % t]
            assert mine == sorted(mine)
