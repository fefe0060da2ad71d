"""The accumulator kernels (future, producer_batch, record_accumulator) on both implementations,
without a network: SendPath.send -> ready -> drain, and identical batch bytes from both."""
import random

import pytest

from pyprod import config
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.errors import IllegalStateError, KafkaTimeoutError, MessageSizeTooLargeError
from pyprod.producer import accumulator_settings, send_settings
from tests.harness.fake_metadata import ListenedVersion


class FakeMetadata(ListenedVersion):
    def __init__(self, partitions=6, leader=0):
        self.version = 1
        parts = {i: PartitionInfo("t", i, leader, 0, [0], [0], []) for i in range(partitions)}
        self.cluster = Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, {"t": parts})


def accumulator(k, cfg, metadata, tm=None, seed=7):
    """A RecordAccumulator with a config's settings, as the producer builds it (seeded)."""
    acc = k.RecordAccumulator(metadata, tm, seed=seed, **accumulator_settings(cfg))
    metadata.add_update_listener(acc.metadata_updated)
    return acc


def _path(k, waits=None, metadata=None, **configs):
    cfg = config.build(**configs)
    acc = accumulator(k, cfg, FakeMetadata() if metadata is None else metadata)
    wakeups = []
    sp = k.SendPath(acc, lambda *a: (waits if waits is not None else []).append(a),
                    lambda: wakeups.append(1), **send_settings(cfg))
    return acc, sp, wakeups


def _drain_all(acc, now=10**12):
    acc.begin_flush()
    out = []
    while acc.has_undrained():
        for batches in acc.drain(FakeMetadata().cluster, {0}, 1 << 20, now).values():
            out.extend(batches)
    return out


def _records(n, seed=1):
    rng = random.Random(seed)
    for i in range(n):
        key = None if i % 3 == 0 else b"k%d" % rng.randrange(100)
        headers = [("h\u00e9", b"x"), ("n", None)] if i % 5 == 0 else None
        yield dict(value=rng.randbytes(rng.choice([0, 10, 100, 3000])), key=key,
                   headers=headers, partition=i % 6, timestamp_ms=1_700_000_000_000 + i)


def test_batches_are_byte_identical_in_both(both):
    payloads = []
    for k in both:
        acc, sp, _ = _path(k, batch_size=4096, compression_type="lz4")
        futures = [sp.send("t", **r) for r in _records(3000)]
        batches = _drain_all(acc)
        payloads.append(sorted((b.topic_partition.partition, bytes(b.payload)) for b in batches))
        for b in batches:
            acc.complete(b, base_offset=100)
        assert all(f.get(0).offset >= 100 for f in futures)
    assert payloads[0] == payloads[1]


def test_keyed_and_sticky_partitioning(k):
    from kafka.partitioner.default import murmur2

    acc, sp, wakeups = _path(k, batch_size=1024)
    keys = [b"key-%d" % i for i in range(500)]
    keyed = [sp.send("t", b"v", key=key) for key in keys]
    sticky = [sp.send("t", b"x" * 100) for _ in range(2000)]
    for batch in _drain_all(acc):
        acc.complete(batch, base_offset=0)
    for key, f in zip(keys, keyed):
        assert f.get(0).partition == (murmur2(key) & 0x7fffffff) % 6
    parts = [f.get(0).partition for f in sticky]
    assert set(parts) == set(range(6))  # the sticky partition moves on as batches fill
    runs = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert runs < len(parts) / 5  # ... but sticks for a while
    assert wakeups


def test_futures_complete_once_per_batch(k):
    acc, sp, _ = _path(k)
    futures = [sp.send("t", b"%d" % i, partition=1) for i in range(10)]
    (batch,) = _drain_all(acc)
    assert not futures[0].is_done
    acc.complete(batch, base_offset=40, log_append_time=5)
    assert [f.get(0).offset for f in futures] == list(range(40, 50))
    assert futures[3].get(0).timestamp == 5


def test_errors(k):
    acc, sp, _ = _path(k, max_request_size=2000, buffer_memory=1 << 20)
    with pytest.raises(MessageSizeTooLargeError):
        sp.send("t", b"x" * 5000)
    with pytest.raises(TypeError):
        sp.send("t", "text")
    with pytest.raises(TypeError):
        sp.send("t", b"v", headers=[("k", 1)])
    with pytest.raises(ValueError):
        sp.send("t")
    with pytest.raises(ValueError):
        sp.send("t", b"v", partition=-1)
    sp.closed = True
    with pytest.raises(IllegalStateError):
        sp.send("t", b"v")


def test_full_buffer_times_out(k):
    acc, sp, _ = _path(k, batch_size=1024, buffer_memory=4096, max_block_ms=50)
    with pytest.raises(KafkaTimeoutError):
        for i in range(100):
            sp.send("t", b"x" * 500, partition=i % 6)


def test_unknown_topic_asks_for_metadata(k):
    waits = []
    acc, sp, _ = _path(k, waits=waits)
    with pytest.raises(KafkaTimeoutError):
        sp.send("other", b"v")  # the fake wait returns without metadata
    assert waits and waits[0][0] == "other"


@pytest.mark.parametrize("bad", [dict(partition=2 ** 31), dict(partition=2 ** 64),
                                 dict(timestamp_ms=2 ** 63), dict(timestamp_ms=-1)])
def test_out_of_range_partition_and_timestamp_are_value_errors(k, bad):
    _, sp, _ = _path(k)
    with pytest.raises(ValueError):
        sp.send("t", b"v", **bad)
