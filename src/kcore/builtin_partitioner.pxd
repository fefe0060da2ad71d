# BuiltInPartitioner (see builtin_partitioner.pyx): cimported by record_accumulator, send_path
# and batch_send.
#
# Threads (the one place these rules are written; builtin_partitioner.pyx points here). One
# partitioner per topic, shared by every caller thread:
# - topic, available, num_partitions, _rng: read and written with the GIL only.
# - sticky_batch_size: set in __init__, then only read (also without the GIL, by _add_produced).
# - sticky: written with the GIL only (_sticky_partition, _switch_from, _update_partitions, which
#   may set it to -1). Read without the GIL and without a lock by send_batch's walk
#   (batch_send.pyx _Call._walk) and _add_produced, while other threads switch it. A value read
#   so is only a hint: it may be -1, or >= the reader's own partition count (the topic grew
#   since the reader sized its arrays), and may have changed by the time it is used: the reader
#   bounds-checks it against its own count before indexing with it.
# - produced: written with the GIL (_switch_from resets it) and without it (_add_produced, from
#   any number of walks at once), no lock: an approximate counter. Lost or misattributed updates
#   are harmless: it only decides when the sticky partition switches.
# nogil: _add_produced (any thread, no lock; see sticky and produced); partition_for_key (pure).
# GIL only: _update_partitions, _sticky_partition, _next_partition, _switch_from.
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
