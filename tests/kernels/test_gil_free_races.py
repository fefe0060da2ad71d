"""The interleavings of issue 27, each made to happen on purpose, on both implementations:
another thread's metadata update and sticky switch in the middle of a send_batch call, a column
that changes length during the call, a batch collected in a reference cycle, a send() that
waits for memory while another thread's writer holds the open batch, a batch whose build
raises in drain(), a release that raises, and a fork while the pool is in use. The topic
updates' interleavings come from the collector on a GIL build and from real threads on a
free-threaded one (its collector ignores gc.set_threshold)."""
import gc
import sys
import sysconfig
import threading
import time
import types

import cramjam
import pytest

from pyprod import config
from pyprod.errors import IllegalStateError, KafkaError
from pyprod.producer import send_settings
from tests.harness.forked import needs_fork, run_forked, run_isolated

from test_batch_growth import _complete, _send, _values
from test_record_accumulator import FakeMetadata, _drain_all, accumulator

# The free-threaded collector ignores gc.set_threshold(1): the topic-update races are driven
# with real threads there, RACE_ROUNDS rounds each.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
RACE_ROUNDS = 400
WAIT_S = 0.05


def _paths(k, metadata, wakeup=lambda: None, **configs):
    cfg = config.build(**configs)
    acc = accumulator(k, cfg, metadata)
    sp = k.SendPath(acc, lambda *a: None, wakeup, **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, wakeup, **send_settings(cfg))
    return acc, sp, bp


def _grow_topic(metadata, partitions):
    """What a metadata update on another thread does: more partitions, a new version."""
    grown = FakeMetadata(partitions)
    metadata.cluster, metadata.version = grown.cluster, metadata.version + 1


def _drain_on(acc, cluster):
    """Every batch, drained against cluster (the grown topic's)."""
    acc.begin_flush()
    batches = []
    while acc.has_undrained():
        for drained in acc.drain(cluster, {0}, 1 << 20, 10**12).values():
            batches.extend(drained)
    return batches


def test_sticky_partition_past_the_calls_partitions(k):
    """The topic grows and another thread's switch moves the sticky partition past the
    partitions the call started with: the call takes the new partition (compiled: its slot
    array grows; it indexed past it before)."""
    meta = FakeMetadata(2)
    seen = []

    def wakeup():  # runs in the call (a new batch): another thread's update, then a switch
        if seen:
            return
        info = acc.topic_info("t")
        seen.append(info.partitioner.sticky)
        _grow_topic(meta, 16)
        info = acc.topic_info("t")
        while info.partitioner.sticky < 2:
            info.partitioner.switch_from(info.partitioner.sticky)
        seen.append(info.partitioner.sticky)

    acc, _, bp = _paths(k, meta, wakeup, batch_size=16384)
    values = [b"%06d" % i for i in range(3000)]
    future = bp.send("t", values)
    assert seen[0] < 2 <= seen[1]
    batches = _drain_on(acc, meta.cluster)
    assert not any(b.appending for b in batches)
    parts = {b.topic_partition.partition for b in batches}
    assert seen[1] in parts and max(parts) >= 2
    assert sorted(_values(batches)) == values
    _complete(acc, batches)
    assert future.get(0).record_count == 3000
    assert acc.pool.available_memory == acc.pool.total_memory


class _LyingLength(list):
    """A sequence whose len() says more than it holds."""

    def __len__(self):
        return 5000


def _shrinking_serializer(column):
    def serialize(value):
        if value == b"v3":
            del column[1:]  # the column shrinks during the call
        return value
    return serialize


@pytest.mark.parametrize("case", ["lying_len", "values_shrink", "keys_shrink",
                                  "stamps_shrink", "headers_lying_len", "values_grow"])
def test_a_column_that_changes_during_the_call_raises(k, case):
    acc, _, bp = _paths(k, FakeMetadata(), lambda: None)
    n = 10
    values = [b"v%d" % i for i in range(n)]
    cols = dict(values=values)
    if case == "lying_len":
        cols["values"] = _LyingLength([b"only"])
    elif case == "headers_lying_len":
        cols["headers"] = _LyingLength([[("h", b"x")]])
        cols["values"] = [b"v"] * 5000
    elif case == "values_grow":
        cfg = dict(value_serializer=lambda v: values.append(b"more") or v)
        acc, _, bp = _paths(k, FakeMetadata(), lambda: None, **cfg)
    else:
        column = {"values_shrink": values, "keys_shrink": [b"k"] * n,
                  "stamps_shrink": [1] * n}[case]
        cfg = dict(value_serializer=_shrinking_serializer(column))
        acc, _, bp = _paths(k, FakeMetadata(), lambda: None, **cfg)
        name = {"keys_shrink": "keys", "stamps_shrink": "timestamps"}.get(case)
        if name:
            column[:] = list(column)
            cols[name] = column
    with pytest.raises((ValueError, TypeError)):
        bp.send("t", **cols)
    assert not acc.has_undrained() and not acc.has_incomplete()
    assert acc.pool.available_memory == acc.pool.total_memory


def test_a_batch_in_a_cycle_is_collected_undrained(k):
    """A batch off its queue, still on its pool memory, in a cycle through a user callback:
    the collector clears the cycle (compiled: it had set the batch's pool to None, then the
    batch gave its memory back through None)."""
    acc, sp, bp = _paths(k, FakeMetadata())
    for p in range(6):
        sp.send("t", b"v" * 100, partition=p)
    for dq in acc.topic_info("t").deques:
        batch = dq.popleft()  # undrained: taken off the queue, not built
        # a send_batch call's segment whose future's callback refers to the batch (made after
        # the batch, so the collector clears the batch first)
        batch.segments = [(lambda b=batch: b, 0, 0, 0)]
    del acc, sp, bp, dq, batch
    for _ in range(3):
        gc.collect()


def test_a_waiting_send_never_grows_a_batch_another_writer_holds(k):
    """send() waits for memory while a send_batch call on another thread fills the open batch
    (``appending``): once memory comes, the held batch stays where it is (a move would free
    the block its writer writes into) and the record goes into a new batch."""
    acc, sp, _ = _paths(k, FakeMetadata(), batch_size=1024, batch_max_size=8192,
                        buffer_memory=16384)
    pool = acc.pool
    _send(sp, 1)
    batch = acc.topic_info("t").deques[0][0]
    batch.appending = True  # held by another writer
    held = pool.allocate(pool.available_memory - 512, 0)  # a new batch must wait
    sender = threading.Thread(target=_send, args=(sp, 1), kwargs=dict(start=1))
    sender.start()
    while pool.waiters == 0:
        time.sleep(0.001)
    pool.deallocate(held)
    sender.join(10)
    assert not sender.is_alive()
    dq = acc.topic_info("t").deques[0]
    assert len(dq) == 2 and dq[0] is batch
    assert pool.available_memory == 16384 - 2 * 1024  # the held batch did not move or grow
    batch.appending = False
    batches = _drain_all(acc)
    assert _values(batches) == [b"%06d" % i + b"v" * 100 for i in range(2)]
    _complete(acc, batches)
    assert pool.available_memory == 16384


class _FailingGzip:
    """cramjam.gzip whose first compress raises (a codec error while the Sender drains)."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def compress(self, data, *args, **kwargs):
        self.calls += 1
        if self.calls == 1:
            raise cramjam.CompressionError("injected")
        return self.real.compress(data, *args, **kwargs)


def test_a_batch_whose_build_raises_fails_alone(k, monkeypatch):
    """drain() pops a batch, then building it raises: the batch fails with a KafkaError, the
    other batches go (it was in no queue and not in flight, pending until close)."""
    acc, sp, _ = _paths(k, FakeMetadata(), compression_type="gzip")
    futures = [sp.send("t", b"v%d" % p, partition=p) for p in range(3)]
    monkeypatch.setattr(cramjam, "gzip", _FailingGzip(cramjam.gzip))
    batches = _drain_all(acc)
    assert len(batches) == 2 and not acc.has_undrained()
    failed = [f for f in futures if f.is_done]
    assert len(failed) == 1 and isinstance(failed[0].exception, KafkaError)
    assert "could not be built" in str(failed[0].exception)
    _complete(acc, batches)
    assert all(f.is_done for f in futures) and not acc.has_incomplete()
    assert acc.pool.available_memory == acc.pool.total_memory


def test_every_held_batch_is_let_go_when_a_release_raises(k, monkeypatch):
    """The batches a call holds are aborted meanwhile, and telling the call's future raises:
    every batch is still let go (``appending`` cleared), not only those before the error."""
    held = []

    def wakeup():  # the second new batch: both held; abort everything (close(timeout=0))
        dqs = acc.topic_info("t").deques
        if len(held) == 0 and len(dqs[1]):
            held.extend([dqs[0][-1], dqs[1][-1]])
            acc.abort_incomplete(KafkaError("aborted"), close=False)

    acc, _, bp = _paths(k, FakeMetadata(), wakeup)
    future_type = type(bp.send("t", []))

    def refuse(*_a):
        raise RuntimeError("told")

    monkeypatch.setattr(future_type, "range_done", refuse)
    with pytest.raises(RuntimeError, match="told"):
        bp.send("t", [b"v"] * 10, partitions=[i % 2 for i in range(10)])
    assert len(held) == 2 and not any(b.appending for b in held)
    assert acc.pool.available_memory == acc.pool.total_memory


def _hammer(pool, stop):
    while not stop.is_set():
        buf = pool.try_allocate(1024)
        if buf is not None:
            pool.deallocate(buf)


@needs_fork
def test_a_forked_child_never_waits_on_the_pool_lock(k):
    """Fork while other threads take and give back pool memory (the pure twin's lock held by
    one of them as the first fork starts): the fork takes the pool's locks first and the child
    re-makes them (docs/fork.md), so the child finds the pool whole and usable; nothing hangs."""
    pool = k.BufferPool(1 << 20, 1024)
    stop = threading.Event()
    threads = [threading.Thread(target=_hammer, args=(pool, stop)) for _ in range(2)]
    for t in threads:
        t.start()
    if hasattr(pool, "_lock"):  # the pure twin: held as the fork starts, for sure
        held = threading.Event()

        def hold():
            with pool._lock:
                held.set()
                time.sleep(0.2)

        locker = threading.Thread(target=hold)
        threads.append(locker)
        locker.start()
        held.wait(10)

    def child():
        assert (1 << 20) - 2048 <= pool.available_memory <= 1 << 20
        pool.deallocate(pool.allocate(1024, 0))
        pool.close()
        with pytest.raises(IllegalStateError):
            pool.allocate(1024, 0)

    try:
        for _ in range(10):
            run_forked(child)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert pool.available_memory == 1 << 20


def test_a_list_column_while_another_thread_imports_pyarrow(k, monkeypatch):
    """pyarrow half imported by another thread (in sys.modules, no Array yet): a list column
    is still just a list (it raised AttributeError)."""
    acc, _, bp = _paths(k, FakeMetadata())
    monkeypatch.setitem(sys.modules, "pyarrow", types.ModuleType("pyarrow"))
    bp.send("t", [b"v0", b"v1"], partitions=[0, 0])
    batches = _drain_all(acc)
    assert _values(batches) == [b"v0", b"v1"]
    _complete(acc, batches)


def _during_collection(nth, other, call):
    """call() with other() run as the nth collection starts during it: gc.set_threshold(1)
    makes a collection at (nearly) every allocation, and gc.callbacks run other (a GIL build;
    the free-threaded collector ignores that threshold). Returns call()'s result and how many
    collections started."""
    starts = []

    def collecting(phase, _info):
        if phase == "start":
            starts.append(1)
            if len(starts) == nth:
                other()

    gc.callbacks.append(collecting)
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    try:
        return call(), len(starts)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(collecting)


class _Pause(threading.local):
    """Set on the first thread of _on_two_threads only."""
    spins, wait, serialised, entered, other = 0, False, False, None, None


class _PausingMetadata(FakeMetadata):
    """FakeMetadata whose cluster, read by the first thread of _on_two_threads, says so
    (``entered``), then waits for the other thread's call to end (``other``; up to WAIT_S, if
    ``wait``) and spins a while: the window between an update's read of the version and its
    writes, which a preemption (or with the GIL a collection) can open, made wide enough for
    the other thread to land in."""
    pause = _Pause()

    @property
    def cluster(self):
        pause = self.pause
        if pause.entered is not None:
            pause.entered.set()
            if pause.wait and not pause.other.wait(WAIT_S):
                pause.serialised = True  # the other call cannot run meanwhile: a lock
            for _ in range(pause.spins):
                pass
        return self._cluster

    @cluster.setter
    def cluster(self, value):
        self._cluster = value


def _on_two_threads(nth, setup, first, second):
    """A free-threaded build's way to the race: RACE_ROUNDS rounds, each with a fresh state from
    setup(); first(state) and second(state) on two threads (started once, released together by
    a Barrier). Odd rounds: second runs wholly inside first's call, from first's read of the
    metadata's cluster (as the other update runs inside a collection on a GIL build), until a
    round finds that it cannot (they are serialised). Even rounds: both at once, first's read
    and second's start delayed by a few turns that vary with the round and nth, so that they
    overlap at different points. Yields (state, first's result) each round."""
    start, end = threading.Barrier(3), threading.Barrier(3)
    box, results, errors = [None], [None], []
    entered, other = threading.Event(), threading.Event()
    pause = _PausingMetadata.pause

    def run(j):
        try:
            for i in range(RACE_ROUNDS):
                start.wait()
                try:
                    if j == 0:
                        pause.entered, pause.other = entered, other
                        pause.wait = i % 2 and not pause.serialised
                        pause.spins = 0 if pause.wait else (i * 37 + nth * 101) % 3000
                        results[0] = first(box[0])
                    else:
                        if i % 2:
                            entered.wait(WAIT_S)
                        for _ in range((i * 13 + nth * 7) % 120):
                            pass
                        second(box[0])
                except BaseException as e:  # noqa: BLE001 - raised in the test
                    errors.append(e)
                finally:
                    pause.entered = None
                    if j == 1:
                        other.set()
                end.wait()
        except threading.BrokenBarrierError:
            pass

    threads = [threading.Thread(target=run, args=(j,), daemon=True) for j in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(RACE_ROUNDS):
            box[0] = setup()
            entered.clear()
            other.clear()
            start.wait(30)
            end.wait(30)
            if errors:
                raise errors[0]
            yield box[0], results[0]
    finally:
        start.abort()
        end.abort()
        for t in threads:
            t.join(30)


def _raced(nth, setup, first, second, check):
    """check(state, first's result) of every round of _on_two_threads, in a forked child: a
    crash there (kcore without its locks, the GIL off) fails this test alone."""
    def rounds():
        for state, result in _on_two_threads(nth, setup, first, second):
            check(state, result)

    run_isolated(rounds, guard=120)


def _grown(k, partitions):
    """An accumulator whose topic "t" it knows with 2 partitions, the metadata since grown."""
    meta = _PausingMetadata(2)
    acc, sp, _ = _paths(k, meta)
    acc.topic_info("t")
    _grow_topic(meta, partitions)
    return types.SimpleNamespace(meta=meta, acc=acc, sp=sp)


@pytest.mark.parametrize("nth", range(1, 9))
def test_a_topic_update_interleaved_with_another_keeps_partitions_in_step(k, nth):
    """Making a queue for a new partition may run the collector, and so another thread's (or
    a finalizer's) update of the same topic: the partitions and their queues stay in step, one
    queue each (they were shifted: a batch for partition p went into p+1's queue, under p's
    name, and two queues sent one partition's batches out of order). Free-threaded: the other
    update runs on another thread (_on_two_threads)."""
    if FREE_THREADED:
        def update(s):
            return s.acc.topic_info("t")

        _raced(nth, lambda: _grown(k, 8), update, update, _check_in_step)
        return
    s = _grown(k, 8)
    info, starts = _during_collection(nth, lambda: s.acc.topic_info("t"),
                                      lambda: s.acc.topic_info("t"))
    # Each collection the update starts is some nth's interleave. 3.14's incremental collector
    # starts fewer (7 here), so the largest nth may outnumber them: then the smaller ones cover.
    assert starts >= min(nth, 2)
    _check_in_step(s, info)


def _check_in_step(s, info):
    n = info.num_partitions
    assert n == 8
    assert [tp.partition for tp in info.tps[:n]] == list(range(8))
    assert [dq.tp for dq in info.deques[:n]] == info.tps[:n]
    futures = [s.sp.send("t", b"v%d" % p, partition=p) for p in range(8)]
    batches = _drain_on(s.acc, s.meta.cluster)
    assert sorted((b.topic_partition.partition, _values([b])) for b in batches) == \
        [(p, [b"v%d" % p]) for p in range(8)]
    _complete(s.acc, batches)
    assert [f.get(0).partition for f in futures] == list(range(8))


def test_memory_goes_back_when_making_a_batch_raises(k):
    """send() took memory for a new batch, then making the batch raised: the memory goes back
    to the pool (compiled: it was kept for good)."""
    acc, sp, _ = _paths(k, FakeMetadata())
    acc.compression_type = "no-such-codec"  # ProducerBatch(...) refuses it
    for _ in range(3):
        with pytest.raises(Exception):
            sp.send("t", b"v", partition=0)
    assert acc.pool.available_memory == acc.pool.total_memory
    assert not acc.has_undrained() and not acc.has_incomplete()


def test_an_older_topic_update_never_undoes_a_newer_one(k):
    """The other update (a gc callback while this one makes queues) saw newer metadata: this
    one, which read older metadata, leaves the topic as the newer one left it. Free-threaded:
    the other update (newer metadata, then the update) runs on another thread
    (_on_two_threads)."""
    def newer(s):
        _grow_topic(s.meta, 16)  # newer metadata, seen by the other update only
        s.acc.topic_info("t")

    if FREE_THREADED:
        _raced(1, lambda: _grown(k, 8), lambda s: s.acc.topic_info("t"), newer, _check_newest)
        return
    s = _grown(k, 8)
    info, starts = _during_collection(1, lambda: newer(s), lambda: s.acc.topic_info("t"))
    assert starts
    _check_newest(s, info)


def _check_newest(s, info):
    assert info.num_partitions == 16 and info.version == s.meta.version
    assert [dq.tp.partition for dq in info.deques[:16]] == list(range(16))
    assert info.partitioner.num_partitions == 16
