"""Many threads on the kcore pieces that free-threaded CPython runs without the GIL (issue 31):
the partitioner (its lock, and ``sticky``/``produced`` read without it), the Waker (wake() from
callers while the Sender closes it), PoolBuffer (one deallocate wins), SendPath (close() and the
transaction manager's errors while sends run) and SenderLoop's counters. Both implementations.
With the GIL these check the logic under many interleavings (a tiny switch interval); on a
free-threaded build they also run truly in parallel."""
import socket
import sys
import sysconfig
import threading
import time

import pytest

from pyprod import config
from pyprod.errors import IllegalStateError
from pyprod.producer import send_settings

from test_record_accumulator import FakeMetadata, accumulator
from test_sender_loop import NOW, V, Rig

THREADS = 8
# 3.13t with the GIL off: bytearray's export count is not atomic there (python/cpython#129107,
# fixed in 3.14 and not backported), so concurrent memoryviews can leave one "exported" forever
BYTEARRAY_EXPORTS_RACE = (bool(sysconfig.get_config_var("Py_GIL_DISABLED")) and sys.version_info < (3, 14)
                          and not sys._is_gil_enabled())
JOIN_S = 180.0  # a hang guard, not a time limit: the pure twin under qemu-aarch64 took over 30 s


pytestmark = pytest.mark.usefixtures("often_switch")  # tests/harness/fixtures.py


def _run(*targets):
    """Run each (fn, args) in its own thread, started together; re-raise the first error."""
    errors = []
    start = threading.Barrier(len(targets))

    def body(fn, args):
        try:
            start.wait()
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive(), "thread still running after %ss" % JOIN_S
    if errors:
        raise errors[0]


# -- BuiltInPartitioner ---------------------------------------------------------------------------
def test_partitioner_gives_valid_partitions_while_metadata_changes(k):
    """Callers place, count and switch while another thread replaces the partitions (8 and 4,
    with and without a leader everywhere): every partition given is one of the 8, never -1."""
    p = k.BuiltInPartitioner("t", 100, 11)
    p.update_partitions(list(range(8)), 8)
    layouts = [(list(range(8)), 8), ([1, 6], 8), (list(range(4)), 4), ([], 4), ([3], 4)]
    stop = threading.Event()
    seen = [set() for _ in range(THREADS)]

    def update():
        for i in range(3000):
            available, count = layouts[i % len(layouts)]
            p.update_partitions(list(available), count)
        stop.set()

    def place(out):
        while not stop.is_set():
            part = p.sticky_partition()
            out.add(part)
            out.add(p.next_partition())
            p.update_partition_info(part, 40, True)
            if p.add_produced(part, 70):
                p.switch_from(part)
            out.add(p.sticky)  # may be -1 (just dropped): the hint send_batch bounds-checks

    _run((update, ()), *[(place, (seen[i],)) for i in range(THREADS)])
    given = set().union(*seen)
    assert given <= set(range(-1, 8)) and given & set(range(8))
    p.update_partitions([2, 5], 8)
    assert p.sticky in (-1, 0, 1, 2, 3, 4, 5, 6, 7) and p.produced >= 0
    assert {p.next_partition() for _ in range(50)} <= {2, 5}
    assert p.sticky_partition() in range(8) and p.available == [2, 5] and p.num_partitions == 8


def test_partitioner_sticky_partition_is_never_minus_one(k):
    """A caller choosing the first sticky partition while another drops it (fewer partitions):
    sticky_partition() returns a partition, not the -1 the other thread just stored."""
    for _ in range(20):
        p = k.BuiltInPartitioner("t", 1 << 30, 3)
        p.update_partitions(list(range(8)), 8)
        got = []

        def shrink():
            for _ in range(500):
                p.update_partitions(list(range(8)), 8)
                p.switch_from(p.sticky)
                p.update_partitions([0], 1)

        def choose():
            for _ in range(500):
                got.append(p.sticky_partition())

        _run((shrink, ()), (choose, ()), (choose, ()))
        assert -1 not in got and set(got) <= set(range(8))


# -- Waker ----------------------------------------------------------------------------------------
def _stray_bytes(socks):
    n = 0
    for s in socks:
        try:
            n += len(s.recv(64))
        except BlockingIOError:
            pass
    return n


def test_waker_wakes_from_many_threads_while_it_closes(k):
    """Callers wake while the owner drains and then closes; sockets made right after the close
    take the descriptors it gave back, and no caller's byte ever lands in them."""
    stray = 0
    for _ in range(40):
        w = k.Waker()
        closed = threading.Event()
        fresh = []

        def wake():
            for _ in range(400):
                w.wakeup()
            closed.wait(JOIN_S)
            for _ in range(200):  # after close(): nothing, and no error
                w.wakeup()

        def owner():
            for _ in range(50):
                w.drain()
            w.close()
            for _ in range(4):  # reuse the two descriptors it gave back
                a, b = socket.socketpair()
                a.setblocking(False)
                b.setblocking(False)
                fresh.extend((a, b))
            closed.set()

        _run((owner, ()), *[(wake, ()) for _ in range(THREADS)])
        time.sleep(0.001)
        if not k.pure:  # the compiled twin's guarantee (the pure one writes through a socket
            stray += _stray_bytes(fresh)  # object, which may race its close() in CPython)
        for s in fresh:
            s.close()
        assert w.pending in (True, False)
    assert stray == 0


def test_waker_pending_is_cleared_by_drain_and_set_by_one_wake(k):
    w = k.Waker()
    try:
        _run(*[(w.wakeup, ()) for _ in range(THREADS)])
        assert w.pending
        n = len(w.reader.recv(64))
        assert n == 1 if not k.pure else 1 <= n <= THREADS  # compiled: one byte for them all
        w.drain()
        assert not w.pending
        w.wakeup()
        assert w.pending
    finally:
        w.close()


# -- PoolBuffer -----------------------------------------------------------------------------------
def test_pool_buffer_released_once_by_racing_deallocates(k):
    pool = k.BufferPool(1 << 20, 1024)
    for size in (1024, 3000) * 25:
        buf = pool.allocate(size, 1000)
        outcomes = []

        def release():
            try:
                pool.deallocate(buf)
                outcomes.append("ok")
            except IllegalStateError:
                outcomes.append("again")

        _run(*[(release, ()) for _ in range(THREADS)])
        assert sorted(outcomes) == ["again"] * (THREADS - 1) + ["ok"]
        assert len(buf) == 0
        assert pool.available_memory == pool.total_memory


def test_pool_buffer_views_against_deallocate(k):
    """Threads take and drop views while another deallocates: it refuses while a view is out,
    succeeds once none is, and a view made after it is empty."""
    if k.pure and BYTEARRAY_EXPORTS_RACE:   # the pure PoolBuffer is a bytearray
        pytest.skip("3.13t's bytearray export count races (python/cpython#129107, fixed in 3.14)")
    pool = k.BufferPool(1 << 20, 4096)
    for _ in range(10):
        buf = pool.allocate(4096, 1000)
        sizes = set()

        def view():
            for _ in range(300):
                with memoryview(buf) as m:
                    sizes.add(len(m))

        def release():
            while True:
                try:
                    return pool.deallocate(buf)
                except BufferError:
                    time.sleep(0)

        _run((release, ()), *[(view, ()) for _ in range(THREADS - 1)])
        assert sizes <= {0, 4096} and len(buf) == 0
        assert len(memoryview(buf)) == 0
        assert pool.available_memory == pool.total_memory


# -- SendPath -------------------------------------------------------------------------------------
def _send_path(k, tm=None):
    cfg = config.build(max_block_ms=1000)
    meta = FakeMetadata(2)
    acc = accumulator(k, cfg, meta)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, txn_partitions=tm,
                    **send_settings(cfg))
    return acc, sp


def test_send_path_close_while_sending(k):
    """Sends from many threads while another closes: each send is appended or refused as
    closed, and once a thread saw the refusal every later send of it is refused too."""
    _, sp = _send_path(k)
    sent = [0] * THREADS

    def send(me):
        refused = 0
        while refused < 200:
            try:
                sp.send("t", b"v", partition=sent[me] % 2)
                assert not refused, "a send went through after one was refused"
                sent[me] += 1
            except IllegalStateError:
                refused += 1

    def close():
        while sum(sent) < 2000:
            time.sleep(0)
        sp.closed = True

    _run((close, ()), *[(send, (i,)) for i in range(THREADS)])
    assert sp.closed and sum(sent) >= 2000
    with pytest.raises(IllegalStateError):
        sp.send("t", b"v")


def test_send_path_reads_errors_another_thread_swaps(k):
    """The transaction manager's fatal_error and send_refusal replaced over and over by one
    thread while callers send: each send is appended or raises exactly one of those errors."""
    tm = k.TxnPartitionMap(5, transactional=True)
    _, sp = _send_path(k, tm)
    errors = [IllegalStateError("refused %d" % i) for i in range(4)]
    fatal = [ValueError("fatal %d" % i) for i in range(4)]
    raised = set()

    def swap():
        for i in range(4000):
            tm.send_refusal = errors[i % 4] if i % 3 else None
            tm.fatal_error = fatal[i % 4] if i % 7 == 0 else None
            _ = tm.fatal_error, tm.send_refusal
        tm.send_refusal = tm.fatal_error = None

    def send():
        for i in range(2000):
            try:
                sp.send("t", b"v", partition=i % 2)
            except (IllegalStateError, ValueError) as e:
                raised.add(e)

    _run((swap, ()), *[(send, ()) for _ in range(THREADS // 2)])
    assert raised <= set(errors) | set(fatal)
    assert tm.fatal_error is None and tm.send_refusal is None
    sp.send("t", b"v", partition=0)


# -- SenderLoop -----------------------------------------------------------------------------------
def test_sender_loop_counters_read_while_the_sender_counts(k):
    """The Sender frames requests while other threads read counters() and snapshot() and one
    clears `running`: every reader sees the counters only grow, and the totals add up."""
    rig = Rig(k)
    batches, _ = rig.batches()
    loop = rig.loop
    rounds = 1500
    done = threading.Event()

    def sender():
        for _ in range(rounds):
            loop.request(V, batches, NOW, 0)
        done.set()

    def read():
        last = (0, 0, 0)
        while not done.is_set():
            c = loop.counters()
            _, counts, topics, nodes, _ = loop.snapshot(NOW)
            now = (c["request-total"], counts["records"], nodes.get(0, {}).get("requests", 0))
            assert all(a <= b for a, b in zip(last, now)), (last, now)
            assert counts["batches"] >= 0 and loop.batches >= 0
            last = now

    def stop():
        while not done.is_set():
            loop.running = False
            assert not loop.running
            loop.running = True

    _run((sender, ()), (stop, ()), *[(read, ()) for _ in range(THREADS - 2)])
    assert loop.requests == rounds and loop.batches == 3 * rounds
    _, counts, topics, nodes, _ = loop.snapshot(NOW)
    assert counts["records"] == 6 * rounds and topics["t"]["batches"] == 3 * rounds
    assert nodes[0]["requests"] == rounds and loop.running
