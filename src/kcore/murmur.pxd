# Java's Utils.murmur2 and the default partitioner's key -> partition rule.
# Threads: pure functions, no shared state: callable without the GIL, from any thread.
from libc.stdint cimport int32_t, uint8_t

cdef int32_t murmur2_hash(const uint8_t* data, Py_ssize_t n) noexcept nogil
# (murmur2 & 0x7fffffff) % num_partitions; num_partitions must be > 0.
cdef int32_t partition_of(const uint8_t* key, Py_ssize_t n, int32_t num_partitions) noexcept nogil
