"""One producer per distinct config in each Python worker process, shared by the tasks that
reuse the worker (the idea of Spark's InternalKafkaProducerPool).

- acquire(config) hands out the cached producer for that config (creating it on a miss) and
  counts a reference; release(producer) gives it back. A producer in use is never closed.
- A producer unused for ``idle_timeout_s`` (default 600 s, like Spark's
  spark.kafka.producer.cache.timeout; env PYPROD_SPARK_PRODUCER_CACHE_TIMEOUT, seconds) is
  flushed and closed by a daemon evictor thread, or by the next acquire/release.
- release(producer, discard=True) (after a failed task) drops it from the cache at once and
  closes it, abandoning what it still buffers (Spark retries the task), when its last user
  releases it.
- Fork safety: a process forked from one holding producers (a Spark daemon forks its workers)
  starts with an empty cache and makes its own: the inherited entries' references and idle
  clocks are the parent's (an inherited producer would work, docs/fork.md, but the parent's
  tasks hold it). The cache notices the new pid or kcore.fork_generation().
- At interpreter exit every cached producer is flushed and closed, and in a PySpark worker
  also when its executor shuts down (:mod:`pyprod.spark.executor_shutdown`).
- stats() counts, since the process started: producers created, acquisitions (one per task)
  and producers closed.
"""
from __future__ import annotations

import atexit
import logging
import os
import pickle
import threading
import time
import weakref

from kcore import fork_generation
from pyprod.producer import KafkaProducer
from pyprod.spark import executor_shutdown
from pyprod.spark.stores import materialize  # PKCS12 stores -> PEM files

log = logging.getLogger("pyprod.spark")

DEFAULT_IDLE_TIMEOUT_S = 600.0
ENV_IDLE_TIMEOUT = "PYPROD_SPARK_PRODUCER_CACHE_TIMEOUT"
CLOSE_TIMEOUT_S = 30.0


def _default_factory(config):
    return KafkaProducer(**materialize(config))


def _generation():
    return fork_generation()


def _freeze(value):
    """A hashable stand-in for a config value, equal for equal configs across processes
    (objects such as partitioners arrive as fresh unpickled copies in every task)."""
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        from pyspark import cloudpickle as dumper
    except ImportError:
        dumper = pickle
    try:
        return ("pickled", dumper.dumps(value))
    except Exception:  # noqa: BLE001 - unpicklable: fall back to identity
        return ("id", id(value))


def config_key(config):
    return tuple(sorted((k, _freeze(v)) for k, v in config.items()))


class _Entry:
    __slots__ = ("key", "producer", "refs", "last_used", "discarded")

    def __init__(self, key, producer, now):
        self.key, self.producer, self.refs, self.last_used = key, producer, 0, now
        self.discarded = False


class ProducerCache:
    """A reference-counted cache of producers by config; see the module doc."""

    def __init__(self, factory=None, idle_timeout_s=None, clock=time.monotonic,
                 evictor=True, generation=_generation):
        if idle_timeout_s is None:
            idle_timeout_s = float(os.environ.get(ENV_IDLE_TIMEOUT, DEFAULT_IDLE_TIMEOUT_S))
        if not idle_timeout_s > 0:
            raise ValueError("idle_timeout_s must be > 0, got %r" % (idle_timeout_s,))
        self.idle_timeout_s = idle_timeout_s
        self._factory = factory or _default_factory
        self._clock = clock
        self._generation = generation
        self._use_evictor = evictor
        self._reset()
        if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: ref() is not None and ref()._reset())

    def _reset(self):
        """Forget everything (a new process): the entries belong to the parent."""
        self._lock = threading.Lock()
        self._entries = {}   # config key -> _Entry
        self._by_id = {}     # id(producer) -> _Entry, discarded ones included until released
        self._pid = os.getpid()
        self._gen = self._generation()
        self._evictor = None
        self._stop = threading.Event()
        self._created = self._acquired = self._closed = 0

    def _check_process(self):
        if self._pid != os.getpid() or self._gen != self._generation():
            log.debug("pyprod.spark: new process, dropping %d inherited producers",
                      len(self._by_id))
            self._reset()

    # -- the API ---------------------------------------------------------------------------
    def acquire(self, config):
        """The cached producer for ``config`` (a dict of KafkaProducer keyword arguments)."""
        self._check_process()
        key = config_key(config)
        self._close_all_of(self._take_idle())
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.refs += 1
                entry.last_used = self._clock()
                self._acquired += 1
                return entry.producer
        executor_shutdown.close_on_shutdown(self)  # before the producer starts its threads
        producer = self._factory(dict(config))  # outside the lock: it connects
        with self._lock:
            self._created += 1
            self._acquired += 1
            entry = self._entries.get(key)
            spare = None
            if entry is None:  # still a miss: ours goes in
                entry = _Entry(key, producer, self._clock())
                self._entries[key] = entry
                self._by_id[id(producer)] = entry
            else:
                spare = producer  # another thread won the race
            entry.refs += 1
            entry.last_used = self._clock()
        if spare is not None:
            self._close(spare)
        self._start_evictor()
        return entry.producer

    def release(self, producer, discard=False):
        """Give back a producer from :meth:`acquire`; ``discard`` drops it from the cache
        (closed when no task uses it any more)."""
        self._check_process()
        with self._lock:
            entry = self._by_id.get(id(producer))
            if entry is None or entry.producer is not producer or entry.refs <= 0:
                raise ValueError("release() of a producer this cache did not hand out, or "
                                 "released more often than acquired")
            entry.refs -= 1
            entry.last_used = self._clock()
            if discard and not entry.discarded:
                entry.discarded = True
                if self._entries.get(entry.key) is entry:
                    del self._entries[entry.key]
            dropped = entry.discarded and entry.refs == 0
            if dropped:
                del self._by_id[id(producer)]
        if dropped:
            self._close(producer, timeout=0)
        self._close_all_of(self._take_idle())

    def evict_idle(self):
        """Close producers unused for idle_timeout_s; how many were closed."""
        self._check_process()
        idle = self._take_idle()
        self._close_all_of(idle)
        return len(idle)

    def close_all(self, timeout=CLOSE_TIMEOUT_S):
        """Flush and close every producer of this process (in use or not); stop the evictor."""
        if self._pid != os.getpid():
            return
        self._stop.set()
        with self._lock:
            producers = [e.producer for e in self._by_id.values()]
            self._entries.clear()
            self._by_id.clear()
        self._close_all_of(producers, timeout)

    def stats(self):
        """{'producers': cached count, 'in_use': references held, 'pid': owner pid, and since
        the process started: 'created', 'acquired' (acquire() calls), 'closed'}."""
        with self._lock:
            return {"producers": len(self._entries),
                    "in_use": sum(e.refs for e in self._by_id.values()), "pid": self._pid,
                    "created": self._created, "acquired": self._acquired,
                    "closed": self._closed}

    def __len__(self):
        return len(self._entries)

    # -- internals -------------------------------------------------------------------------
    def _take_idle(self):
        now = self._clock()
        with self._lock:
            idle = [e for e in self._entries.values()
                    if e.refs == 0 and now - e.last_used >= self.idle_timeout_s]
            for e in idle:
                del self._entries[e.key]
                del self._by_id[id(e.producer)]
        return [e.producer for e in idle]

    def _close_all_of(self, producers, timeout=CLOSE_TIMEOUT_S):
        for p in producers:
            self._close(p, timeout)

    def _close(self, producer, timeout=CLOSE_TIMEOUT_S):
        with self._lock:
            self._closed += 1
        try:
            producer.close(timeout=timeout)
        except Exception:  # noqa: BLE001 - closing must not fail the caller
            log.warning("pyprod.spark: closing a cached producer failed", exc_info=True)

    def _start_evictor(self):
        if not self._use_evictor or (self._evictor is not None and self._evictor.is_alive()):
            return
        interval = max(0.05, min(self.idle_timeout_s / 2.0, 60.0))
        ref, stop = weakref.ref(self), self._stop

        def run():
            while not stop.wait(interval):
                cache = ref()
                if cache is None or cache._pid != os.getpid():
                    return
                cache.evict_idle()
                del cache

        self._evictor = threading.Thread(target=run, name="pyprod-spark-producer-evictor",
                                         daemon=True)
        self._evictor.start()


_default = None
_default_lock = threading.Lock()


def default_cache():
    """This process's cache (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProducerCache()
        return _default


@atexit.register
def _close_at_exit():
    if _default is not None:
        _default.close_all()
