# cython: binding=False
"""Compiled twin of kcore/pure/builtin_partitioner.py (see it for the design).

Thread rules (``sticky`` and ``produced`` are used without the GIL): builtin_partitioner.pxd.
"""
import time

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
        self.num_partitions = 0
        self.available = []
        self.sticky = -1
        self.produced = 0
        if seed is None:
            seed = hash((id(self), time.time_ns()))
        self._rng = <uint64_t>(seed & 0xFFFFFFFFFFFFFFFF) | 1

    def update_partitions(self, list available, int num_partitions):
        self._update_partitions(available, num_partitions)

    cdef int _update_partitions(self, list available, int num_partitions) except -1:
        self.available = available
        self.num_partitions = num_partitions
        if self.sticky >= num_partitions:
            self.sticky = -1
        return 0

    def sticky_partition(self):
        return self._sticky_partition()

    cdef int _sticky_partition(self) except -1:
        if self.sticky < 0:
            self.sticky = self._next_partition()
        return self.sticky

    def next_partition(self):
        return self._next_partition()

    cdef int _next_partition(self) except -1:
        cdef list pool = [p for p in self.available if p != self.sticky] or self.available
        if not pool:
            pool = list(range(self.num_partitions))
        return pool[_xorshift(&self._rng) % len(pool)]

    def add_produced(self, int partition, Py_ssize_t appended_bytes):
        return self._add_produced(partition, appended_bytes)

    cdef bint _add_produced(self, int partition, Py_ssize_t appended_bytes) noexcept nogil:
        if partition != self.sticky:
            return False
        self.produced += appended_bytes
        return self.produced >= self.sticky_batch_size

    def switch_from(self, int partition):
        return bool(self._switch_from(partition))

    cdef int _switch_from(self, int partition) except -1:
        if partition != self.sticky:
            return 0
        self.sticky = self._next_partition()
        self.produced = 0
        return 1

    def update_partition_info(self, int partition, Py_ssize_t appended_bytes,
                              bint enable_switch):
        if self._add_produced(partition, appended_bytes) and enable_switch:
            self._switch_from(partition)
