"""Open batches grow past batch_size up to batch_max_size (KIP-782) on both implementations:
a batch is sendable at batch_size but takes more records while the Sender has not drained it,
moving to a bigger buffer from the BufferPool only if the pool gives it at once."""
import threading
import time

import pytest
from kafka.record import MemoryRecords

from pyprod import config
from pyprod.errors import KafkaError, KafkaTimeoutError
from pyprod.producer import send_settings

from test_record_accumulator import FakeMetadata, _drain_all, accumulator

TS0 = 1_700_000_000_000


def _paths(k, metadata=None, **configs):
    cfg = config.build(**configs)
    acc = accumulator(k, cfg, metadata or FakeMetadata())
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, lambda: None, **send_settings(cfg))
    return acc, sp, bp


def _send(sp, n, partition=0, size=100, start=0):
    return [sp.send("t", b"%06d" % i + b"v" * size, partition=partition,
                    timestamp_ms=TS0 + i) for i in range(start, start + n)]


def _values(batches):
    out = []
    for batch in batches:
        recs = MemoryRecords(bytes(batch.payload))
        while recs.has_next():
            out.extend(r.value for r in recs.next_batch())
    return out


def _fill(sp, i=0):
    """Records i, i+1, ... one at a time until the pool has no room for another batch
    (KafkaTimeoutError with max_block_ms=0); how many were sent in all."""
    try:
        while True:
            _send(sp, 1, start=i)
            i += 1
    except KafkaTimeoutError:
        return i


def _complete(acc, batches):
    offset = 0
    for batch in batches:
        acc.complete(batch, base_offset=offset)
        offset += batch.record_count


def test_open_batch_grows_up_to_batch_max_size(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192)
    futures = _send(sp, 300)  # about 33 KB, nothing drained meanwhile
    batches = _drain_all(acc)
    sizes = [len(b.payload) for b in batches]
    assert all(1024 < s <= 8192 for s in sizes[:-1]), sizes
    assert len(batches) <= 6  # 33 batches of batch_size without growth
    assert _values(batches) == [b"%06d" % i + b"v" * 100 for i in range(300)]
    _complete(acc, batches)
    assert [f.get(0).offset for f in futures] == list(range(300))
    assert acc.pool.available_memory == acc.pool.total_memory


def _greedy(k, batch_size, records):
    """The batches a fixed batch_size makes (a batch closes when a record does not fit)."""
    out, builder = [], k.RecordBatchBuilder(batch_size)
    for ts, value in records:
        if not builder.append(ts, None, value):
            out.append(builder.build())
            builder = k.RecordBatchBuilder(batch_size)
            assert builder.append(ts, None, value)
    out.append(builder.build())
    return out


def test_no_growth_when_batch_max_size_is_batch_size(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=1024)
    assert acc.batch_max_size == 1024
    _send(sp, 300)
    batches = _drain_all(acc)
    records = [(TS0 + i, b"%06d" % i + b"v" * 100) for i in range(300)]
    assert [bytes(b.payload) for b in batches] == _greedy(k, 1024, records)
    _complete(acc, batches)


def test_default_accumulator_never_grows(k):
    cfg = config.build(batch_size=1024)
    settings = {key: cfg[key] for key in ("batch_size", "linger_ms", "buffer_memory",
                                          "compression_type", "delivery_timeout_ms",
                                          "retry_backoff_ms")}
    acc = k.RecordAccumulator(FakeMetadata(), None, **settings)  # no batch_max_size given
    assert acc.batch_max_size == 1024


def test_sendable_at_batch_size(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192, linger_ms=10**6)
    cluster = FakeMetadata().cluster
    dq = acc.topic_info("t").deques[0]
    i = 0
    while True:
        _send(sp, 1, start=i)
        i += 1
        batch = dq[0]
        if batch.builder.size_in_bytes() >= 1024:
            break
        assert not batch.is_full()
        assert acc.ready(cluster, batch.last_attempt_ms).ready_nodes == set()  # lingers
    assert len(dq) == 1 and not batch.closed and batch.is_full()
    assert acc.ready(cluster, batch.last_attempt_ms).ready_nodes == {0}
    _send(sp, 5, start=i)  # still open: it keeps taking records
    assert len(dq) == 1 and batch.record_count == i + 5
    _complete(acc, _drain_all(acc))


def test_a_busy_node_gets_grown_or_lingered_batches(k):
    # requests in flight to the leader: a batch waits past batch_size until it has grown to
    # batch_max_size, lingered, or a newer batch closed it; an idle leader gets it at once
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=4096, linger_ms=50)
    cluster = FakeMetadata().cluster
    dq = acc.topic_info("t").deques[0]
    _send(sp, 12)  # about 1.4 KB: past batch_size, open
    batch = dq[0]
    t0 = batch.last_attempt_ms
    assert batch.is_full() and not batch.is_grown()
    assert acc.ready(cluster, t0).ready_nodes == {0}
    busy = acc.ready(cluster, t0, {0})
    assert busy.ready_nodes == set() and busy.next_ready_check_delay_ms == 50
    assert acc.ready(cluster, t0 + 50, {0}).ready_nodes == {0}  # lingered
    other = sp.send("t", b"y", partition=1)  # young and small, on the same node
    assert acc.drain(cluster, {0}, 1 << 20, t0, {0})[0] == []  # the busy node waits
    assert not other.is_done
    _send(sp, 40, start=12)  # over 4 KB: this batch is closed, a new one opens
    assert batch.is_grown() and len(dq) == 2
    assert acc.ready(cluster, t0, {0}).ready_nodes == {0}
    _complete(acc, _drain_all(acc))


def test_drained_batch_never_grows(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192)
    _send(sp, 5)
    (first,) = _drain_all(acc)
    acc.end_flush()
    payload = bytes(first.payload)
    assert first.closed and first.is_full()
    _send(sp, 50, start=5)
    rest = _drain_all(acc)
    assert first.record_count == 5 and bytes(first.payload) == payload
    assert _values([first] + rest) == [b"%06d" % i + b"v" * 100 for i in range(55)]
    _complete(acc, [first] + rest)
    assert acc.pool.available_memory == acc.pool.total_memory


def test_pool_memory_is_exact_after_growth(k):
    acc, sp, bp = _paths(k, batch_size=1024, batch_max_size=16384, buffer_memory=200_000)
    pool = acc.pool
    for p in range(6):
        _send(sp, 100, partition=p)
    bp.send("t", [b"x" * 300] * 200, partitions=[i % 3 for i in range(200)])
    assert pool.available_memory < pool.total_memory
    batches = _drain_all(acc)
    assert max(len(b.payload) for b in batches) > 1024
    _complete(acc, batches)
    assert pool.available_memory == pool.total_memory
    assert pool.waiters == 0


def test_growth_only_with_free_memory(k):
    # 5 KiB: the first batch moves from 1 KiB to 4 KiB (GROWTH); 8 KiB is never free
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192, buffer_memory=5120,
                        max_block_ms=0)
    dq = acc.topic_info("t").deques[0]
    i = _fill(sp)  # the pool is empty: a third batch cannot start
    first, second = dq
    assert first.is_full() and 1024 < first.builder.size_in_bytes() <= 4096  # may grow later
    assert acc.pool.available_memory == 0
    batches = _drain_all(acc)
    assert _values(batches) == [b"%06d" % j + b"v" * 100 for j in range(i)]
    _complete(acc, batches)
    assert acc.pool.available_memory == 5120


def test_a_new_batch_starts_at_the_size_the_last_one_filled(k):
    """A batch that cannot grow on: the next one starts at the bytes it filled when the pool
    has them, with no growth steps (a copy each). 16 KiB of memory: the first batch grows
    1 -> 4 -> 8 KiB; the second starts at about 8 KiB and fills it (from 1 KiB, it would have
    grown to 4 KiB only: 8 KiB more is never free at once)."""
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192, buffer_memory=16384,
                        max_block_ms=0)
    dq = acc.topic_info("t").deques[0]
    i = _fill(sp)
    assert len(dq) == 2 and acc.pool.available_memory < 1024
    assert dq[0].builder.size_in_bytes() > 4096 and dq[1].builder.size_in_bytes() > 4096
    batches = _drain_all(acc)
    assert _values(batches) == [b"%06d" % j + b"v" * 100 for j in range(i)]
    _complete(acc, batches)
    assert acc.pool.available_memory == 16384


def test_growth_never_waits_behind_a_waiter(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192, buffer_memory=8192)
    pool, dq = acc.pool, acc.topic_info("t").deques[0]
    _send(sp, 5)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(8192, 60_000)))
    waiter.start()
    while pool.waiters == 0:
        time.sleep(0.001)
    batch = dq[0]
    with pytest.raises(KafkaTimeoutError):  # no growth (a waiter is first), no new batch
        while True:
            assert acc.append(dq[0].topic_partition, TS0, None, b"v" * 100, None, -1,
                              k.record_size_upper_bound(None, b"v" * 100, None), 0, 0)[0]
    assert batch.is_full() and batch.builder.size_in_bytes() <= 1024 and len(dq) == 1
    acc.abort_incomplete(KafkaError("aborted"), close=False)  # frees the batch's slab
    waiter.join()
    pool.deallocate(got[0])
    assert pool.available_memory == 8192 and pool.waiters == 0


def test_a_wait_for_memory_is_for_the_room_to_grow(k):
    """A caller that must wait for memory waits for the room its open batch needs to grow,
    not for a new batch_size one: once the memory comes, the batch grows where it is and
    takes the record (under memory pressure batches do not stay small)."""
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=8192, buffer_memory=16384)
    pool, dq = acc.pool, acc.topic_info("t").deques[0]
    i = 0
    while not len(dq) or dq[0].builder.size_in_bytes() < 3900:  # grown once, to 4 KiB
        _send(sp, 1, start=i)
        i += 1
    held = pool.allocate(pool.available_memory - 512, 0)  # too little left for a new batch
    batch = dq[0]
    sender = threading.Thread(target=lambda: _send(sp, 5, start=i))
    sender.start()
    while pool.waiters == 0:
        time.sleep(0.001)
    assert batch.is_full() and not batch.closed and len(dq) == 1  # sendable meanwhile
    pool.deallocate(held)
    sender.join(10)
    assert not sender.is_alive()
    assert len(dq) == 1 and batch.builder.size_in_bytes() > 4096 and not batch.is_grown()
    batches = _drain_all(acc)
    assert _values(batches) == [b"%06d" % j + b"v" * 100 for j in range(i + 5)]
    _complete(acc, batches)
    assert pool.available_memory == 16384


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_twins_write_the_same_bytes(both, compression):
    out = []
    for k in both:
        acc, sp, bp = _paths(k, batch_size=1024, batch_max_size=6000, buffer_memory=200_000,
                             compression_type=compression, max_block_ms=0)
        payloads = []
        for rnd in range(4):
            for p in range(3):
                _send(sp, 40 + 13 * rnd, partition=p, size=37 * (p + 1), start=1000 * rnd)
            bp.send("t", [b"y" * (50 + 7 * i) for i in range(150)], keys=[b"k%d" % (i % 9)
                    for i in range(150)], timestamps=[TS0 + i for i in range(150)])
            for i in range(60):  # (sticky choices differ between the twins: keyed here)
                sp.send("t", b"z" * (i * 11 % 300), key=b"s%d" % i, timestamp_ms=TS0 + i)
            batches = _drain_all(acc)
            acc.end_flush()
            payloads.append(sorted((b.topic_partition.partition, bytes(b.payload))
                                   for b in batches))
            _complete(acc, batches)
        assert acc.pool.available_memory == acc.pool.total_memory
        out.append(payloads)
    assert out[0] == out[1]
    if compression is None:
        assert max(len(p) for rnd in out[0] for _, p in rnd) > 1024  # some grew


def test_send_batch_grows_its_batches(k):
    acc, _, bp = _paths(k, batch_size=1024, batch_max_size=8192)
    values = [b"%06d" % i + b"w" * 200 for i in range(300)]
    fut = bp.send("t", values, partitions=[1] * 300)
    batches = _drain_all(acc)
    assert all(1024 < len(b.payload) <= 8192 for b in batches[:-1])
    assert _values(batches) == values
    _complete(acc, batches)
    assert fut.get(0).partition_counts == {1: 300}


def test_split_of_a_grown_batch(k):
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=65536)
    futures = _send(sp, 200, partition=3)
    (batch,) = _drain_all(acc)
    acc.end_flush()
    assert len(batch.payload) > 16384
    halves = acc.split_and_reenqueue(batch)
    assert [h.record_count for h in halves] == [100, 100]
    drained = _drain_all(acc)
    assert drained == halves
    assert _values(drained) == [b"%06d" % i + b"v" * 100 for i in range(200)]
    for offset, half in zip((0, 100), drained):
        acc.complete(half, base_offset=offset)
    acc.complete(batch)  # the Sender's part: the batch completes once its halves did
    assert [f.get(0).offset for f in futures] == list(range(200))
    assert acc.pool.available_memory == acc.pool.total_memory


def test_a_refused_grown_batch_lowers_batch_max_size(k):
    """The Sender's part after MESSAGE_TOO_LARGE: later batches grow to half the refused
    batch's size at most, never below batch_size, and the bound is never raised."""
    acc, sp, _ = _paths(k, batch_size=1024, batch_max_size=65536)
    assert acc.lower_batch_max_size(40000) == 20000
    assert acc.batch_max_size == 20000
    assert acc.lower_batch_max_size(50000) is None  # never raised again
    _send(sp, 300)  # about 33 KB, nothing drained meanwhile
    batches = _drain_all(acc)
    assert all(1024 < len(b.payload) <= 20000 for b in batches[:-1])
    assert _values(batches) == [b"%06d" % i + b"v" * 100 for i in range(300)]
    _complete(acc, batches)
    assert acc.lower_batch_max_size(2500) == 1250
    assert acc.lower_batch_max_size(1000) == 1024  # a batch_size batch: no growth at all
    assert acc.batch_max_size == 1024
    assert acc.lower_batch_max_size(500) is None


def test_builder_size_and_max_size(k):
    b = k.RecordBatchBuilder(200)
    assert b.size_in_bytes() == 61
    while b.append(TS0, None, b"x" * 30):
        pass
    n = b.size_in_bytes()
    assert n <= 200 and not b.append(TS0, None, b"x" * 30)
    b.raise_max_size(100)  # never lowers it
    assert not b.append(TS0, None, b"x" * 30)
    b.raise_max_size(400)
    assert b.append(TS0, None, b"x" * 30) and b.size_in_bytes() > n


def test_pool_try_allocate_never_waits(k):
    pool = k.BufferPool(4096, 1024)
    a = pool.try_allocate(3000)
    assert len(a) == 3000 and pool.try_allocate(2000) is None
    assert pool.try_allocate(5000) is None  # more than the pool holds
    b = pool.try_allocate(1096)
    assert pool.available_memory == 0
    pool.deallocate(a)
    pool.deallocate(b)
    assert pool.available_memory == 4096
    with pytest.raises(ValueError):
        pool.try_allocate(-1)


def test_the_sender_is_woken_once_when_a_batch_reaches_batch_size(k):
    """Java wakes the Sender when a batch fills; with growth that is the append that takes it
    to batch_size (not every later one), and each new batch."""
    cfg = config.build(batch_size=1024, batch_max_size=8192, linger_ms=60_000)
    acc = accumulator(k, cfg, FakeMetadata())
    wakeups = []
    sp = k.SendPath(acc, lambda *a: None, lambda: wakeups.append(1), **send_settings(cfg))
    dq = acc.topic_info("t").deques[0]
    for i in range(60):  # 60 x ~110 B: past batch_size, below batch_max_size
        before = dq[0].builder.size_in_bytes() >= 1024 if dq else None
        _send(sp, 1, start=i)
        if before is None:
            assert len(wakeups) == 1  # the new batch
        elif not before and dq[0].builder.size_in_bytes() >= 1024:
            assert len(wakeups) == 2  # it just became full
    assert len(dq) == 1 and len(wakeups) == 2
    _complete(acc, _drain_all(acc))
