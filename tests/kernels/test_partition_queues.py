"""The accumulator's per-partition queues and ready(), on both implementations: ready() follows
leaders, muting, linger and backoff; caller threads append while another thread runs ready()
and drain() as the Sender does (the compiled ready() and drain() scan the queues without the
GIL from 512 queues on); PartitionQueue keeps the deque API and its references, and the cycle
collector sees them."""
import sys
import threading

import pytest

from pyprod.cluster import Broker, Cluster, PartitionInfo

from test_batch_growth import _complete, _paths, _send, _values
from test_record_accumulator import FakeMetadata


def _cluster(leaders):
    """Topic t, partition i led by leaders[i] (None: no leader), brokers 0 and 1."""
    brokers = {n: Broker(n, "127.0.0.1", 9092 + n, None) for n in (0, 1)}
    parts = {i: PartitionInfo("t", i, -1 if leader is None else leader, 0, [0], [0], [])
             for i, leader in enumerate(leaders)}
    return Cluster(brokers, {"t": parts})


def test_ready_follows_leaders_mute_and_linger(k):
    acc, sp, _ = _paths(k, linger_ms=100)
    for part in range(3):
        _send(sp, 1, partition=part)
    now = max(dq[0].created_ms for dq in acc.topic_info("t").deques[:3])
    result = acc.ready(_cluster([0, 1, None]), now)
    assert (result.ready_nodes, result.unknown_leader_topics) == (set(), {"t"})
    assert 0 < result.next_ready_check_delay_ms <= 100
    result = acc.ready(_cluster([0, 1, None]), now + 100)
    assert result.ready_nodes == {0, 1}
    acc.mute(acc.topic_info("t").tps[1])
    assert acc.ready(_cluster([0, 1, None]), now + 100).ready_nodes == {0}
    assert acc.drain(_cluster([0, 1, None]), {1}, 1 << 20, now + 100) == {1: []}
    acc.unmute(acc.topic_info("t").tps[1])
    moved = _cluster([1, 1, 1])  # new metadata: every partition on node 1
    result = acc.ready(moved, now + 100)
    assert (result.ready_nodes, result.unknown_leader_topics) == ({1}, set())
    drained = acc.drain(moved, {0, 1}, 1 << 20, now + 100)
    assert drained[0] == [] and len(drained[1]) == 3


def test_backoff_holds_a_retry(k):
    acc, sp, _ = _paths(k)
    _send(sp, 1)
    now = acc.topic_info("t").deques[0][0].created_ms
    (batch,) = acc.drain(FakeMetadata().cluster, {0}, 1 << 20, now)[0]
    acc.reenqueue(batch, now)
    result = acc.ready(FakeMetadata().cluster, now + 1)
    assert result.ready_nodes == set() and 0 < result.next_ready_check_delay_ms <= 100
    assert acc.ready(FakeMetadata().cluster, now + 100).ready_nodes == {0}


@pytest.mark.parametrize("partitions", [6, 600])  # the scans keep the GIL, or let it go
def test_callers_append_while_the_sender_scans(k, partitions):
    """4 caller threads (send and send_batch) against a thread that loops ready() and drain():
    every record is drained once, in order per partition."""
    metadata = FakeMetadata(partitions)
    acc, sp, bp = _paths(k, metadata, batch_size=1024, buffer_memory=4 << 20)
    cluster, done, drained = metadata.cluster, threading.Event(), []
    for part in range(4, partitions):  # a queue each
        sp.send("t", b"x", partition=part)

    def sender():
        while True:
            finished = done.is_set()
            if acc.ready(cluster, 1 << 62).ready_nodes:
                for batches in acc.drain(cluster, {0}, 1 << 20, 1 << 62).values():
                    drained.extend((b.topic_partition.partition, _values([b])) for b in batches)
                    _complete(acc, batches)
            if finished and not acc.has_undrained():
                return

    def caller(part, batch):
        for i in range(0, 2000, 50):
            if batch:
                bp.send("t", [b"%d-%06d" % (part, j) for j in range(i, i + 50)],
                        partitions=[part] * 50)
            else:
                for j in range(i, i + 50):
                    sp.send("t", b"%d-%06d" % (part, j), partition=part)

    threads = [threading.Thread(target=caller, args=(p, p % 2)) for p in range(4)]
    loop = threading.Thread(target=sender)
    loop.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acc.begin_flush()
    done.set()
    loop.join(60)
    assert not loop.is_alive()
    for part in range(4):
        got = [v for p, values in drained if p == part for v in values]
        assert got == [b"%d-%06d" % (part, j) for j in range(2000)]


def test_partition_queue_is_a_deque(k):
    acc, sp, _ = _paths(k, batch_size=64)
    batches = []
    for part in range(6):
        _send(sp, 1, partition=part)
        batches.append(acc.topic_info("t").deques[part][0])
    refs = [sys.getrefcount(b) for b in batches]
    dq = k.PartitionQueue(("t", 9))
    for i in range(5):  # past the first ring size: it grows
        dq.append(batches[i])
    dq.appendleft(batches[5])
    dq.insert(2, batches[0])
    assert list(dq) == [batches[5], batches[0], batches[0], *batches[1:5]]
    ends = (len(dq), dq[-1], dq[1]) == (7, batches[4], batches[0])
    assert ends
    with pytest.raises(IndexError):
        dq[7]
    assert dq.popleft() is batches[5]
    assert sys.getrefcount(batches[0]) == refs[0] + 2
    dq.clear()
    assert len(dq) == 0 and [sys.getrefcount(b) for b in batches] == refs
    with pytest.raises(IndexError):
        dq.popleft()
    for i in range(6):
        dq.append(batches[i])
    del dq  # its references go with it
    assert [sys.getrefcount(b) for b in batches] == refs


def test_partition_queue_cycles_are_collected(k):
    """A queue's batches are visible to the cycle collector: a batch whose callback refers back
    to the queue's owner does not keep the cycle alive."""
    import gc
    import weakref
    class Owner:
        pass

    batch = k.ProducerBatch(("t", 0), 64, None, 0)
    owner = Owner()
    owner.queue = k.PartitionQueue(("t", 0))
    owner.queue.append(batch)
    batch.segments = [owner]   # the batch refers back to the queue's owner
    assert batch in gc.get_referents(owner.queue)
    alive = weakref.ref(owner)
    del owner, batch
    gc.collect()
    assert alive() is None
