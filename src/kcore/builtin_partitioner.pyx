# cython: binding=False
"""Compiled twin of kcore/pure/builtin_partitioner.py (see it for the design).

Thread rules (``_lock``, ``_owner``; each lane's ``sticky`` and ``produced`` are also used
without the GIL and without the lock): builtin_partitioner.pxd.
"""
import time

from kcore.atomic_impl cimport kc_load_i64, kc_load_int, kc_store_i64, kc_store_int

__all__ = ["BuiltInPartitioner"]

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident() nogil


cdef inline int _shared_lane(int64_t ident) noexcept nogil:
    # Fibonacci hashing: idents are aligned addresses, whose low bits are all alike
    return <int>((<uint64_t>ident * <uint64_t>0x9E3779B97F4A7C15ULL) >> 61)  # 3 bits: _LANES


cdef inline uint64_t _xorshift(uint64_t* state) noexcept nogil:
    cdef uint64_t x = state[0]
    x ^= x << 13
    x ^= x >> 7
    x ^= x << 17
    state[0] = x
    return x


cdef class BuiltInPartitioner:
    """The sticky partition of one topic and the bytes produced to it since it was chosen, per
    caller thread (its lane)."""

    def __init__(self, str topic, Py_ssize_t sticky_batch_size, seed=None):
        cdef int i
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        if seed is None:
            seed = hash((id(self), time.time_ns()))
        with self._lock:
            self._available = []
            self._rng = <uint64_t>(seed & 0xFFFFFFFFFFFFFFFF) | 1
            kc_store_int(&self._num_partitions, 0)
            kc_store_int(&self._lanes_full, 0)
            for i in range(_LANES):
                kc_store_i64(&self._owner[i], 0)
                kc_store_int(&self._lanes[i].sticky, -1)
                kc_store_i64(&self._lanes[i].produced, 0)

    @property
    def num_partitions(self):
        return kc_load_int(&self._num_partitions)

    @property
    def available(self):
        with self._lock:
            available = self._available
        return available

    @property
    def sticky(self):
        """The calling thread's sticky partition (-1: none yet)."""
        return self.sticky_hint()

    @property
    def produced(self):
        cdef int i = self._lane()
        return kc_load_i64(&self._lanes[i].produced) if i >= 0 else 0

    cdef int _lane(self) noexcept nogil:
        cdef int64_t me = <int64_t>PyThread_get_thread_ident()
        cdef int i
        for i in range(_LANES):
            if kc_load_i64(&self._owner[i]) == me:
                return i
        if kc_load_int(&self._lanes_full):  # shares a lane
            return _shared_lane(me)
        return -1

    cdef int _claim(self) noexcept:
        # _lock held: the calling thread's lane, claimed now if it has none
        cdef int64_t me = <int64_t>PyThread_get_thread_ident()
        cdef int i = self._lane()
        if i >= 0:
            return i
        for i in range(_LANES):
            if kc_load_i64(&self._owner[i]) == 0:
                kc_store_i64(&self._owner[i], me)
                return i
        kc_store_int(&self._lanes_full, 1)
        return _shared_lane(me)

    def update_partitions(self, list available, int num_partitions):
        self._update_partitions(available, num_partitions)

    cdef int _update_partitions(self, list available, int num_partitions) except -1:
        cdef list old  # dropped after the lock is let go
        cdef int i
        with self._lock:
            old = self._available
            self._available = available
            kc_store_int(&self._num_partitions, num_partitions)
            for i in range(_LANES):
                if kc_load_int(&self._lanes[i].sticky) >= num_partitions:
                    kc_store_int(&self._lanes[i].sticky, -1)
        return 0

    def sticky_partition(self):
        return self._sticky_partition()

    cdef int _sticky_partition(self) except -1:
        cdef int i = self._lane(), part
        if i >= 0:
            part = kc_load_int(&self._lanes[i].sticky)
            if part >= 0:
                return part
        with self._lock:
            i = self._claim()
            part = kc_load_int(&self._lanes[i].sticky)
            if part < 0:
                part = self._pick(i)
                kc_store_int(&self._lanes[i].sticky, part)
        return part

    def next_partition(self):
        return self._next_partition()

    cdef int _next_partition(self) except -1:
        with self._lock:
            return self._pick(self._lane())

    cdef int _pick(self, int lane) except -1:
        # pool[r % len(pool)] of the pure twin's pool, counted rather than built: the available
        # partitions but every lane's sticky one, else but the lane's own, else all available
        # ones, else all partitions
        cdef int cur = kc_load_int(&self._lanes[lane].sticky) if lane >= 0 else -1, p, i
        cdef int stickies[_LANES]
        cdef Py_ssize_t n = 0, total = 0, k
        cdef uint64_t r
        for i in range(_LANES):
            stickies[i] = kc_load_int(&self._lanes[i].sticky)
        for p in self._available:
            total += 1
            n += not _in(p, stickies)
        r = _xorshift(&self._rng)
        if n > 0:
            k = r % <uint64_t>n
            for p in self._available:
                if not _in(p, stickies):
                    if k == 0:
                        return p
                    k -= 1
        n = 0
        for p in self._available:
            n += p != cur
        if n == 0:
            if total == 0:  # none available: any partition
                if self._num_partitions <= 0:
                    raise ZeroDivisionError("no partitions")  # as the twin
                return r % <uint64_t>self._num_partitions
            cur, n = -1, total  # every available one
        k = r % <uint64_t>n
        for p in self._available:
            if p != cur:
                if k == 0:
                    return p
                k -= 1
        raise RuntimeError("unreachable")

    def add_produced(self, int partition, Py_ssize_t appended_bytes):
        return self._add_produced(partition, appended_bytes)

    cdef bint _add_produced(self, int partition, Py_ssize_t appended_bytes) noexcept nogil:
        cdef int64_t produced
        cdef int i = self._lane()
        if i < 0 or partition != kc_load_int(&self._lanes[i].sticky):
            return False
        produced = kc_load_i64(&self._lanes[i].produced) + appended_bytes
        kc_store_i64(&self._lanes[i].produced, produced)
        return produced >= self.sticky_batch_size

    def switch_from(self, int partition):
        return bool(self._switch_from(partition))

    cdef int _switch_from(self, int partition) except -1:
        cdef int i = self._lane()
        if i < 0:
            return 0
        with self._lock:
            if partition != kc_load_int(&self._lanes[i].sticky):
                return 0
            kc_store_int(&self._lanes[i].sticky, self._pick(i))
            kc_store_i64(&self._lanes[i].produced, 0)
        return 1

    def update_partition_info(self, int partition, Py_ssize_t appended_bytes,
                              bint enable_switch):
        if self._add_produced(partition, appended_bytes) and enable_switch:
            self._switch_from(partition)


cdef inline bint _in(int p, const int* stickies) noexcept:
    cdef int i
    for i in range(_LANES):
        if stickies[i] == p:
            return True
    return False
