# cython: binding=False
"""Compiled twin of kcore/pure/builtin_partitioner.py (see it for the design).

Thread rules (``_lock``; ``sticky`` and ``produced`` are also used without the GIL and without
the lock): builtin_partitioner.pxd.
"""
import time

from kcore.atomic_impl cimport kc_load_i64, kc_load_int, kc_store_i64, kc_store_int

__all__ = ["BuiltInPartitioner"]


cdef inline uint64_t _xorshift(uint64_t* state) noexcept nogil:
    cdef uint64_t x = state[0]
    x ^= x << 13
    x ^= x >> 7
    x ^= x << 17
    state[0] = x
    return x


cdef class BuiltInPartitioner:
    """The sticky partition of one topic and the bytes produced to it since it was chosen."""

    def __init__(self, str topic, Py_ssize_t sticky_batch_size, seed=None):
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        if seed is None:
            seed = hash((id(self), time.time_ns()))
        with self._lock:
            self._available = []
            self._rng = <uint64_t>(seed & 0xFFFFFFFFFFFFFFFF) | 1
            kc_store_int(&self._num_partitions, 0)
            kc_store_int(&self._sticky, -1)
            kc_store_i64(&self._produced, 0)

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
        return kc_load_int(&self._sticky)

    @property
    def produced(self):
        return kc_load_i64(&self._produced)

    def update_partitions(self, list available, int num_partitions):
        self._update_partitions(available, num_partitions)

    cdef int _update_partitions(self, list available, int num_partitions) except -1:
        cdef list old  # dropped after the lock is let go
        with self._lock:
            old = self._available
            self._available = available
            kc_store_int(&self._num_partitions, num_partitions)
            if kc_load_int(&self._sticky) >= num_partitions:
                kc_store_int(&self._sticky, -1)
        return 0

    def sticky_partition(self):
        return self._sticky_partition()

    cdef int _sticky_partition(self) except -1:
        cdef int part = kc_load_int(&self._sticky)
        if part >= 0:
            return part
        with self._lock:
            part = kc_load_int(&self._sticky)
            if part < 0:
                part = self._pick()
                kc_store_int(&self._sticky, part)
        return part

    def next_partition(self):
        return self._next_partition()

    cdef int _next_partition(self) except -1:
        with self._lock:
            return self._pick()

    cdef int _pick(self) except -1:
        # pool[r % len(pool)] of the pure twin's pool (the available partitions but the sticky
        # one, else all available ones, else all partitions), counted rather than built.
        cdef int cur = kc_load_int(&self._sticky), p
        cdef Py_ssize_t n = 0, total = 0, k
        cdef uint64_t r
        for p in self._available:
            total += 1
            n += p != cur
        r = _xorshift(&self._rng)
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
        if partition != kc_load_int(&self._sticky):
            return False
        produced = kc_load_i64(&self._produced) + appended_bytes
        kc_store_i64(&self._produced, produced)
        return produced >= self.sticky_batch_size

    def switch_from(self, int partition):
        return bool(self._switch_from(partition))

    cdef int _switch_from(self, int partition) except -1:
        with self._lock:
            if partition != kc_load_int(&self._sticky):
                return 0
            kc_store_int(&self._sticky, self._pick())
            kc_store_i64(&self._produced, 0)
        return 1

    def update_partition_info(self, int partition, Py_ssize_t appended_bytes,
                              bint enable_switch):
        if self._add_produced(partition, appended_bytes) and enable_switch:
            self._switch_from(partition)
