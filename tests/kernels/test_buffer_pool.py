"""BufferPool: accounting, slab reuse, FIFO waiting, timeouts, export tracking, close()."""
import ctypes
import os
import random
import signal
import threading
import time

import pytest

import kcore
from pyprod.errors import IllegalArgumentError, IllegalStateError, KafkaError, KafkaTimeoutError

JOIN_S = 10.0  # generous: no test may hang, but none should come close


def start(fn, *args):
    """Run fn in a daemon thread; the result or exception lands in box."""
    box = {}

    def run():
        try:
            box["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.box = box
    t.start()
    return t


def join(*threads):
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive(), "thread still blocked after %ss" % JOIN_S


def wait_until(cond, what):
    deadline = time.monotonic() + JOIN_S
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.001)


def address(buf):
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def test_allocate_slab_and_fresh_memory(k):
    pool = k.BufferPool(1000, 100)
    assert (pool.total_memory, pool.slab_size) == (1000, 100)
    assert (pool.available_memory, pool.unallocated_memory, pool.free_slabs) == (1000, 1000, 0)
    a = pool.allocate(100, 0)
    b = pool.allocate(250, 0)
    assert isinstance(a, k.PoolBuffer) and (len(a), len(b)) == (100, 250)
    m = memoryview(a)
    assert not m.readonly and m.nbytes == 100
    m[:] = b"x" * 100
    m.release()
    assert bytes(a) == b"x" * 100
    assert pool.available_memory == 650 and pool.unallocated_memory == 650
    pool.deallocate(a)  # slab size: kept in the free list
    assert (pool.available_memory, pool.unallocated_memory, pool.free_slabs) == (750, 650, 1)
    pool.deallocate(b)  # larger sizes: kept as a spare, still free memory
    assert (pool.available_memory, pool.unallocated_memory, pool.free_slabs) == (1000, 650, 1)
    assert pool.spare_buffers == [250]
    assert len(a) == 0 and len(b) == 0 and memoryview(a).nbytes == 0  # emptied
    assert pool.waiters == 0 and pool.queued() == 0


def test_spare_buffers_are_reused_then_given_up(k):
    pool = k.BufferPool(1000, 100)
    a, b = pool.allocate(400, 0), pool.allocate(200, 0)
    where = address(a)
    pool.deallocate(a)
    pool.deallocate(b)
    assert pool.spare_buffers == [400, 200] and pool.unallocated_memory == 400
    c = pool.allocate(400, 0)  # the same size: the spare itself
    if not k.pure:
        assert address(c) == where
    assert pool.spare_buffers == [200] and pool.available_memory == 600
    d = pool.allocate(500, 0)  # another size: spares become memory before it waits
    assert pool.spare_buffers == [] and pool.available_memory == 100
    e = pool.allocate(50, 0)   # smaller than a slab: never kept
    for buf in (c, d, e):
        pool.deallocate(buf)
    assert pool.spare_buffers == [400, 500] and pool.available_memory == 1000
    assert pool.allocate(1000, 0) is not None  # the whole pool, through the spares


def test_at_most_16_spares_and_none_while_a_caller_waits(k):
    pool = k.BufferPool(10_000, 10)
    bufs = [pool.allocate(200 + i, 0) for i in range(20)]
    for buf in bufs:
        pool.deallocate(buf)
    assert pool.spare_buffers == [200 + i for i in range(16)]
    assert pool.available_memory == 10_000
    big = pool.allocate(9_000, 0)
    held = pool.allocate(800, 0)
    waiter = threading.Thread(target=lambda: pool.deallocate(pool.allocate(900, 5000)))
    waiter.start()
    while pool.waiters == 0:
        time.sleep(0.001)
    pool.deallocate(held)  # a caller waits: the memory goes to it, not to a spare
    waiter.join()
    assert pool.spare_buffers == [900] and pool.available_memory == 1000
    pool.deallocate(big)


def test_pooled_slab_is_reused(k):
    pool = k.BufferPool(1000, 100)
    a = pool.allocate(100, 0)
    where = address(a)
    pool.deallocate(a)
    assert pool.free_slabs == 1
    b = pool.allocate(100, 0)
    assert pool.free_slabs == 0 and pool.available_memory == 900 and len(b) == 100
    if not k.pure:  # the compiled pool hands out the very same memory again
        assert address(b) == where
    c = pool.allocate(99, 0)  # not slab-sized: never from the free list
    pool.deallocate(b)
    pool.deallocate(c)
    assert (pool.free_slabs, pool.available_memory) == (1, 1000)


def test_free_slabs_are_released_to_make_room(k):
    pool = k.BufferPool(1000, 100)
    bufs = [pool.allocate(100, 0) for _ in range(10)]
    assert pool.available_memory == 0
    for b in bufs:
        pool.deallocate(b)
    assert (pool.free_slabs, pool.unallocated_memory) == (10, 0)
    big = pool.allocate(250, 0)  # Java's freeUp: 3 slabs become non-pooled memory
    assert (pool.free_slabs, pool.unallocated_memory, pool.available_memory) == (7, 50, 750)
    whole = pool.allocate(750, 0)
    assert (pool.free_slabs, pool.available_memory) == (0, 0)
    pool.deallocate(big)
    pool.deallocate(whole)
    assert pool.available_memory == 1000


def test_zero_size_and_whole_pool(k):
    pool = k.BufferPool(300, 100)
    z = pool.allocate(0, 0)
    assert len(z) == 0 and pool.available_memory == 300
    w = pool.allocate(300, 0)
    assert pool.available_memory == 0
    pool.deallocate(z)
    pool.deallocate(w)
    assert pool.available_memory == 300


def test_argument_errors(k):
    pool = k.BufferPool(1000, 100)
    with pytest.raises(IllegalArgumentError, match="1001 bytes"):
        pool.allocate(1001, 10_000)  # at once, never waits
    with pytest.raises(IllegalArgumentError):
        pool.allocate(1 << 70, 0)
    with pytest.raises(ValueError):
        pool.allocate(-1, 0)
    with pytest.raises(TypeError):
        pool.allocate(1.5, 0)
    with pytest.raises(TypeError):
        pool.allocate("1", 0)
    with pytest.raises(ValueError):
        pool.allocate(1, -1)
    with pytest.raises(ValueError):
        pool.allocate(1, float("nan"))
    with pytest.raises(TypeError):
        pool.allocate(1, "5")
    for args in ((-1, 10), (100, 0), (100, -5)):
        with pytest.raises(ValueError):
            k.BufferPool(*args)
    with pytest.raises(TypeError):
        k.BufferPool(100.0, 10)
    assert pool.available_memory == 1000
    pool.allocate(1, 2.5)  # a float timeout is fine


def test_deallocate_errors_leave_the_pool_unchanged(k):
    pool, other = k.BufferPool(1000, 100), k.BufferPool(1000, 100)
    buf = pool.allocate(100, 0)
    with pytest.raises(TypeError):
        pool.deallocate(bytearray(100))
    with pytest.raises(TypeError):
        pool.deallocate(None)
    with pytest.raises(ValueError, match="this pool"):
        other.deallocate(buf)
    with pytest.raises(ValueError):
        pool.deallocate(k.PoolBuffer())
    assert pool.available_memory == 900 and other.available_memory == 1000
    pool.deallocate(buf)
    with pytest.raises(IllegalStateError, match="already"):
        pool.deallocate(buf)
    assert (pool.available_memory, pool.free_slabs) == (1000, 1)


def test_deallocate_refused_while_exported(k):
    pool = k.BufferPool(1000, 100)
    buf = pool.allocate(100, 0)
    m = memoryview(buf)
    with pytest.raises(BufferError):
        pool.deallocate(buf)
    assert len(buf) == 100 and pool.available_memory == 900
    m2 = memoryview(m)  # shares m's export: still counts after m is released
    m.release()
    with pytest.raises(BufferError):
        pool.deallocate(buf)
    m2[0] = 7  # still valid memory
    m2.release()
    c = (ctypes.c_char * 100).from_buffer(buf)  # another exporter kind
    with pytest.raises(BufferError):
        pool.deallocate(buf)
    del c
    pool.deallocate(buf)
    assert pool.available_memory == 1000


def test_export_tracking_zero_size(k):
    pool = k.BufferPool(1000, 100)
    buf = pool.allocate(0, 0)
    m = memoryview(buf)
    with pytest.raises(BufferError):
        pool.deallocate(buf)
    m.release()
    pool.deallocate(buf)


def test_pool_buffer_size_is_fixed(k):
    pool = k.BufferPool(1000, 100)
    buf = pool.allocate(10, 0)
    for op in (lambda: buf.append(1), lambda: buf.extend(b"ab"), lambda: buf.__iadd__(b"a")):
        with pytest.raises((BufferError, AttributeError)):
            op()
    assert len(buf) == 10
    pool.deallocate(buf)
    assert pool.available_memory == 1000


def test_pool_buffer_cannot_be_copied(k):
    import copy
    import pickle

    pool = k.BufferPool(1000, 100)
    buf = pool.allocate(10, 0)
    for obj in (buf, pool):  # a copy could be freed twice / split the accounting
        for fn in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError):
                fn(obj)
    pool.deallocate(buf)
    assert pool.available_memory == 1000


def test_timeout_raises_and_returns_partial_memory(k):
    pool = k.BufferPool(1000, 100)
    held = pool.allocate(900, 0)
    with pytest.raises(KafkaTimeoutError):
        pool.allocate(200, 0)
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="200 bytes"):
        pool.allocate(200, 50)  # reserves the free 100 while it waits, then gives it back
    assert time.monotonic() - t0 >= 0.045
    assert (pool.available_memory, pool.waiters) == (100, 0)
    assert isinstance(KafkaTimeoutError(), KafkaError)
    pool.deallocate(held)
    assert pool.available_memory == 1000
    pool.deallocate(pool.allocate(1000, 0))


def test_release_wakes_a_waiter(k):
    pool = k.BufferPool(1000, 100)
    held = [pool.allocate(100, 0) for _ in range(10)]
    t = start(pool.allocate, 300, 10_000)
    wait_until(lambda: pool.waiters == 1, "the waiter")
    assert pool.queued() == 1
    for b in held[:2]:
        pool.deallocate(b)
    time.sleep(0.02)
    assert t.is_alive() and pool.waiters == 1  # 200 of 300 bytes: still waiting
    pool.deallocate(held[2])
    join(t)
    assert "error" not in t.box and len(t.box["result"]) == 300
    assert (pool.waiters, pool.available_memory, pool.free_slabs) == (0, 0, 0)
    pool.deallocate(t.box["result"])
    for b in held[3:]:
        pool.deallocate(b)
    assert pool.available_memory == 1000


def test_waiter_gets_a_pooled_slab(k):
    pool = k.BufferPool(200, 100)
    a, b = pool.allocate(100, 0), pool.allocate(100, 0)
    t = start(pool.allocate, 100, 10_000)
    wait_until(lambda: pool.waiters == 1, "the waiter")
    pool.deallocate(a)
    join(t)
    assert len(t.box["result"]) == 100 and pool.free_slabs == 0 and pool.available_memory == 0
    pool.deallocate(b)
    pool.deallocate(t.box["result"])
    assert (pool.free_slabs, pool.available_memory) == (2, 200)


def test_fifo_order(k):
    pool = k.BufferPool(100, 100)
    held = pool.allocate(100, 0)
    order, threads = [], []

    def take(i, size):
        buf = pool.allocate(size, 10_000)
        order.append(i)
        pool.deallocate(buf)

    sizes = [100, 51, 100, 60, 70, 100, 99, 51]  # > half the pool: one holder at a time
    for i, size in enumerate(sizes):
        threads.append(start(take, i, size))
        wait_until(lambda: pool.waiters == i + 1, "waiter %d" % i)  # arrival order is fixed
    pool.deallocate(held)
    join(*threads)
    assert [t.box.get("error") for t in threads] == [None] * len(sizes)
    assert order == list(range(len(sizes)))
    assert (pool.waiters, pool.available_memory) == (0, 100)


def test_newcomer_queues_behind_waiters(k):
    pool = k.BufferPool(100, 10)
    held = pool.allocate(100, 0)
    big = start(pool.allocate, 100, 10_000)
    wait_until(lambda: pool.waiters == 1, "the first waiter")
    small = start(pool.allocate, 10, 10_000)
    wait_until(lambda: pool.waiters == 2, "the second waiter")
    pool.deallocate(held)
    join(big)
    assert small.is_alive()  # the head took everything first
    pool.deallocate(big.box["result"])
    join(small)
    assert len(small.box["result"]) == 10


def test_no_over_allocation_under_threads(k):
    total, slab = 10_000, 1000
    pool = k.BufferPool(total, slab)
    lock = threading.Lock()
    state = {"out": 0, "max": 0}
    errors = []

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(150):
            size = slab if rng.random() < 0.5 else rng.randint(0, 3 * slab)
            buf = pool.allocate(size, 10_000)
            with lock:
                state["out"] += size
                state["max"] = max(state["max"], state["out"])
                if state["out"] > total:
                    errors.append(state["out"])
            m = memoryview(buf)
            m[:] = bytes([seed]) * size  # memory is exclusively ours until deallocate
            if rng.random() < 0.3:
                time.sleep(0)
            ok = m.tobytes() == bytes([seed]) * size
            m.release()
            with lock:
                state["out"] -= size
                if not ok:
                    errors.append("memory shared with another buffer")
            pool.deallocate(buf)

    threads = [start(worker, s) for s in range(1, 9)]
    join(*threads)
    assert [t.box.get("error") for t in threads] == [None] * 8
    assert errors == []
    assert state["out"] == 0 and state["max"] <= total
    assert pool.available_memory == total and pool.waiters == 0


def test_timeouts_under_contention_keep_accounting(k):
    pool = k.BufferPool(1000, 100)
    results = []

    def worker(seed):
        rng = random.Random(seed)
        for _ in range(40):
            try:
                buf = pool.allocate(rng.choice([100, 250, 600]), rng.choice([0, 1, 5]))
            except KafkaTimeoutError:
                results.append("timeout")
                continue
            time.sleep(0.0005)
            pool.deallocate(buf)
            results.append("ok")

    threads = [start(worker, s) for s in range(6)]
    join(*threads)
    assert [t.box.get("error") for t in threads] == [None] * 6
    assert len(results) == 240 and "ok" in results
    assert pool.available_memory == 1000 and pool.waiters == 0


def test_close_wakes_all_waiters(k):
    pool = k.BufferPool(100, 10)
    held = pool.allocate(100, 0)
    threads = []
    for i in range(3):
        threads.append(start(pool.allocate, 10 * (i + 1), 10_000))
        wait_until(lambda: pool.waiters == i + 1, "waiter %d" % i)
    pool.close()
    join(*threads)
    for t in threads:
        assert isinstance(t.box.get("error"), IllegalStateError)
        assert "closed" in str(t.box["error"])
        assert isinstance(t.box["error"], KafkaError)
    with pytest.raises(IllegalStateError):
        pool.allocate(1, 0)
    assert pool.waiters == 0
    pool.deallocate(held)  # memory can still be returned
    assert pool.available_memory == 100


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_wait_is_interruptible_in_the_main_thread(k):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()

    pool = k.BufferPool(100, 10)
    held = pool.allocate(60, 0)
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        t0 = time.monotonic()
        with pytest.raises(Interrupted):
            pool.allocate(80, 20_000)
        assert time.monotonic() - t0 < 10
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert (pool.waiters, pool.available_memory) == (0, 40)  # partial reservation returned
    pool.deallocate(held)


def test_dropped_buffer_is_freed_but_not_returned(k):
    pool = k.BufferPool(1000, 100)
    buf = pool.allocate(300, 0)
    del buf  # as in Java: memory that is never deallocated stays accounted as in use
    assert pool.available_memory == 700


def test_threads_never_share_memory(k):
    """Callers on four threads take and give back buffers of many sizes (slabs, grown batch
    sizes, odd sizes) while each checks that nobody else wrote into its own."""
    pool = k.BufferPool(16 << 20, 16 << 10)  # enough for all: no thread waits forever
    sizes = [16 << 10, 64 << 10, 256 << 10, 20000, 3000, 1 << 20]

    def churn(seed):
        rng = random.Random(seed)
        held = []
        for i in range(400):
            if held and (len(held) > 2 or rng.random() < 0.5):
                buf, mark = held.pop(rng.randrange(len(held)))
                assert bytes(buf) == mark * len(buf)
                pool.deallocate(buf)
            else:
                buf = pool.allocate(rng.choice(sizes), JOIN_S * 1000)
                mark = bytes([seed * 16 + i % 16])
                memoryview(buf)[:] = mark * len(buf)
                held.append((buf, mark))
        for buf, mark in held:
            assert bytes(buf) == mark * len(buf)
            pool.deallocate(buf)
    ts = [start(churn, seed) for seed in range(4)]
    join(*ts)
    assert [t.box.get("error") for t in ts] == [None] * 4
    assert pool.available_memory == 16 << 20 and pool.waiters == 0


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels only")
def test_memory_comes_from_the_pools_own_region():
    """A pool of 512 KiB or more takes its memory from its own address range (not under
    AddressSanitizer, which must see every block): a freed 3 MiB block merges back and the
    next 2 MiB one starts where it did."""
    import kcore.buffer_pool as bp

    assert bp.BufferPool((1 << 19) - 1, 100).region_bytes == 0  # small pools: malloc alone
    pool = bp.BufferPool(4 << 20, 16 << 10)
    if os.environ.get("PYPROD_SANITIZE_BUILD"):
        assert pool.region_bytes == 0
        return
    assert pool.region_bytes == 8 << 20
    a = pool.allocate(3 << 20, 0)
    assert pool.region_in_use == 4 << 20  # blocks are powers of two
    where = address(a)
    pool.deallocate(a)  # kept as a spare: still the pool's
    b = pool.allocate(2 << 20, 0)  # the spare is given up to make room, and merges back
    assert address(b) == where and pool.region_in_use == 2 << 20
    s = pool.allocate(20000, 0)
    assert pool.region_in_use == (2 << 20) + (32 << 10)
    pool.deallocate(b)
    pool.deallocate(s)
    del a, b, s
    assert pool.available_memory == 4 << 20


def compile_module(tmp_path, name, code, kernel):
    """Build a throwaway Cython module that cimports a kcore kernel (skips without a compiler)."""
    import importlib.util

    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    pkg_dir = os.path.dirname(kernel.__file__)
    src = tmp_path / (name + ".pyx")
    src.write_text(code)
    ext = Extension(name, [str(src)], include_dirs=[pkg_dir])
    dist = Distribution({"ext_modules": cythonize(
        [ext], include_path=[os.path.dirname(pkg_dir)], quiet=True,
        compiler_directives={"language_level": 3, "freethreading_compatible": True})})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib, cmd.build_temp = str(tmp_path), str(tmp_path / "build")
    try:
        dist.run_command("build_ext")
    except Exception as e:  # no compiler: the rest of the suite covers the kernel
        pytest.skip("cannot compile the C API test module: %s" % e)
    spec = importlib.util.spec_from_file_location(name, cmd.get_outputs()[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


C_API = '''
from libc.stdint cimport uint8_t
from libc.string cimport memset
from kcore.buffer_pool cimport (BufferPool, BP_OK, BP_TIMEOUT, BP_CLOSED, BP_TOO_LARGE)

def acquire_release(BufferPool pool, Py_ssize_t size, double ms, bint hold=False):
    cdef uint8_t* mem = NULL
    cdef int rc
    with nogil:
        rc = pool.acquire_raw(size, ms, &mem)
        if rc == BP_OK:
            memset(mem, 0xAB, size)
            if not hold:
                pool.release_raw(mem, size)
    if rc != BP_OK:
        assert mem == NULL
    return rc

codes = dict(ok=BP_OK, timeout=BP_TIMEOUT, closed=BP_CLOSED, too_large=BP_TOO_LARGE)
'''


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels only")
def test_c_api_nogil(tmp_path):
    import kcore.buffer_pool as bp

    mod = compile_module(tmp_path, "bp_capi", C_API, bp)
    c = mod.codes
    pool = bp.BufferPool(1000, 100)
    assert mod.acquire_release(pool, 100, 0) == c["ok"]
    assert (pool.free_slabs, pool.available_memory) == (1, 1000)
    assert mod.acquire_release(pool, 1001, 0) == c["too_large"]
    assert mod.acquire_release(pool, 250, 0) == c["ok"]
    held = pool.allocate(950, 0)
    assert mod.acquire_release(pool, 100, 20) == c["timeout"]
    assert (pool.available_memory, pool.waiters) == (50, 0)
    # a C caller waits without the GIL: this thread keeps running and frees memory for it
    t = start(mod.acquire_release, pool, 300, 10_000)
    wait_until(lambda: pool.waiters == 1, "the C waiter")
    pool.deallocate(held)
    join(t)
    assert t.box.get("result") == c["ok"] and pool.available_memory == 1000
    t = start(mod.acquire_release, pool, 1000, 10_000, True)  # keeps it all
    join(t)
    t = start(mod.acquire_release, pool, 10, 10_000)
    wait_until(lambda: pool.waiters == 1, "the C waiter")
    pool.close()
    join(t)
    assert t.box.get("result") == c["closed"]
