# BuiltInPartitioner (see builtin_partitioner.pyx): cimported by record_accumulator, send_path
# and batch_send.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from kcore.murmur cimport partition_of


cdef class BuiltInPartitioner:
    cdef public str topic
    cdef public Py_ssize_t sticky_batch_size
    cdef public int num_partitions
    cdef public list available
    cdef public int sticky           # the sticky partition, -1 until one is chosen
    cdef public int64_t produced     # bytes appended to it since it was chosen
    cdef uint64_t _rng

    cdef int _update_partitions(self, list available, int num_partitions) except -1
    cdef int _sticky_partition(self) except -1
    cdef int _next_partition(self) except -1
    # Count bytes appended to partition; true once the sticky partition is due to change.
    cdef bint _add_produced(self, int partition, Py_ssize_t appended_bytes) noexcept nogil
    # Move on from partition if it is still the sticky one; 1 if it was.
    cdef int _switch_from(self, int partition) except -1


# Java's BuiltInPartitioner.partitionForKey: (murmur2(key) & 0x7fffffff) % num_partitions.
cdef inline int32_t partition_for_key(const uint8_t* key, Py_ssize_t n,
                                      int32_t num_partitions) noexcept nogil:
    return partition_of(key, n, num_partitions)
