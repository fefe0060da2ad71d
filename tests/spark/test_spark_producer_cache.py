"""pyprod.spark.ProducerCache: sharing by config, reference counts, idle eviction, discard,
fork safety and the close at exit (fake producers; no broker, no Spark)."""
import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pyprod.spark.producer_cache import ProducerCache, config_key
from tests.harness.forked import needs_fork

_serial = itertools.count()


class FakeProducer:
    def __init__(self, config):
        self.config = config
        self.serial = next(_serial)
        self.closed_with = []

    def close(self, timeout=None):
        self.closed_with.append(timeout)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def cache(clock):
    return ProducerCache(factory=FakeProducer, idle_timeout_s=60, clock=clock, evictor=False)


CFG = {"bootstrap_servers": "127.0.0.1:9092", "linger_ms": 5}


def test_one_producer_per_config_shared_and_counted(cache):
    a = cache.acquire(CFG)
    b = cache.acquire(dict(CFG))  # an equal config
    c = cache.acquire(dict(CFG, linger_ms=10))
    assert a is b and a is not c
    assert len(cache) == 2 and cache.stats()["in_use"] == 3
    cache.release(a)
    cache.release(b)
    cache.release(c)
    assert cache.stats()["in_use"] == 0 and len(cache) == 2
    assert a.closed_with == [] and c.closed_with == []  # idle, not yet evicted
    assert cache.acquire(CFG) is a  # reused by the next task


def test_release_errors(cache):
    p = cache.acquire(CFG)
    with pytest.raises(ValueError):
        cache.release(FakeProducer(CFG))
    cache.release(p)
    with pytest.raises(ValueError):
        cache.release(p)  # more releases than acquires


def test_idle_eviction_only_of_unused_producers(cache, clock):
    busy = cache.acquire(CFG)
    idle = cache.acquire(dict(CFG, client_id="other"))
    cache.release(idle)
    clock.now += 59
    assert cache.evict_idle() == 0
    clock.now += 1
    assert cache.evict_idle() == 1
    assert idle.closed_with == [30.0] and busy.closed_with == []
    clock.now += 3600
    assert cache.evict_idle() == 0  # in use: never evicted, however long
    cache.release(busy)
    fresh = cache.acquire(dict(CFG, client_id="other"))  # a miss after eviction
    assert fresh is not idle
    clock.now += 60
    assert cache.evict_idle() == 1 and busy.closed_with == [30.0]  # acquire/release refresh


def test_acquire_and_release_sweep_idle_producers(cache, clock):
    old = cache.acquire(CFG)
    cache.release(old)
    clock.now += 61
    other = cache.acquire(dict(CFG, linger_ms=1))
    assert old.closed_with == [30.0] and len(cache) == 1
    cache.release(other)


def test_discard_drops_at_once_and_closes_on_last_release(cache):
    a = cache.acquire(CFG)
    b = cache.acquire(CFG)
    cache.release(a, discard=True)
    assert len(cache) == 0 and a.closed_with == []  # still used by the other task
    c = cache.acquire(CFG)
    assert c is not a  # new tasks get a new producer
    cache.release(b)
    assert a.closed_with == [0]  # abandoned: the failed task is retried by Spark
    cache.release(c)


def test_close_all(cache):
    a = cache.acquire(CFG)
    b = cache.acquire(dict(CFG, acks=1))
    cache.release(b)
    cache.close_all()
    assert a.closed_with and b.closed_with and len(cache) == 0


class FirstPartition:
    def __call__(self, key, all_partitions, available):
        return all_partitions[0]


def test_config_key_equal_for_equal_objects():
    import pickle
    p1 = FirstPartition()
    p2 = pickle.loads(pickle.dumps(p1))  # what every task gets: an unpickled copy
    assert config_key({"partitioner": p1, "acks": 1}) == config_key({"acks": 1, "partitioner": p2})
    assert config_key({"acks": 1}) != config_key({"acks": "all"})
    hash(config_key({"socket_options": [(6, 1, 1)]}))


def test_fork_generation_change_starts_empty(clock):
    gen = [0]
    cache = ProducerCache(factory=FakeProducer, idle_timeout_s=60, clock=clock, evictor=False,
                          generation=lambda: gen[0])
    a = cache.acquire(CFG)
    gen[0] += 1  # as after a fork through a path the pid check would miss
    b = cache.acquire(CFG)
    assert b is not a and a.closed_with == []  # the parent's producer is left alone
    with pytest.raises(ValueError):
        cache.release(a)  # not this process's


@needs_fork
def test_forked_child_never_uses_the_parents_producer(cache):
    parent = cache.acquire(CFG)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report what the cache hands out, then leave without cleanup
        try:
            child = cache.acquire(CFG)
            again = cache.acquire(CFG)
            msg = "%d %d %d %d" % (child is parent, child is again, parent.serial,
                                   len(parent.closed_with))
        except BaseException as e:  # noqa: BLE001
            msg = "error %r" % (e,)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    assert out == "0 1 %d 0" % parent.serial, out
    assert cache.acquire(CFG) is parent  # the parent's cache is untouched
    cache.release(parent)
    cache.release(parent)


def test_evictor_thread_closes_idle_producers():
    cache = ProducerCache(factory=FakeProducer, idle_timeout_s=0.1)
    p = cache.acquire(CFG)
    cache.release(p)
    done = threading.Event()
    for _ in range(400):  # bounded wait for the daemon thread; no timing is asserted
        if p.closed_with:
            done.set()
            break
        time.sleep(0.05)
    assert done.is_set() and len(cache) == 0
    cache.close_all()


def test_bad_timeout():
    with pytest.raises(ValueError):
        ProducerCache(factory=FakeProducer, idle_timeout_s=0)


def test_env_timeout(monkeypatch):
    monkeypatch.setenv("PYPROD_SPARK_PRODUCER_CACHE_TIMEOUT", "42")
    assert ProducerCache(factory=FakeProducer, evictor=False).idle_timeout_s == 42


def test_default_cache_flushes_and_closes_at_exit(tmp_path):
    mark = tmp_path / "closed"
    script = textwrap.dedent("""
        import sys
        from pyprod.spark import producer_cache as pc
        class P:
            def __init__(self, cfg): pass
            def close(self, timeout=None):
                open(sys.argv[1], "w").write("closed %r" % (timeout,))
        cache = pc.default_cache()
        cache._factory = P
        cache.release(cache.acquire({"bootstrap_servers": "127.0.0.1:1"}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", script, str(mark)], check=True, env=env, timeout=60)
    assert mark.read_text() == "closed 30.0"
