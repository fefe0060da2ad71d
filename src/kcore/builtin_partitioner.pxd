# BuiltInPartitioner (see builtin_partitioner.pyx): cimported by record_accumulator, send_path
# and batch_send.
#
# Threads (the one place these rules are written; builtin_partitioner.pyx points here). One
# partitioner per topic, shared by every caller thread:
# - _lock (a PyMutex; a leaf: nothing else is taken under it, no Python code runs under it but
#   reading ints of `_available`): held by _update_partitions, _sticky_partition (once no
#   sticky partition is set), _next_partition and _switch_from, and the `available` property.
#   It guards _available, _num_partitions, _rng and every write of _sticky.
# - topic, sticky_batch_size: set in __init__, then only read (sticky_batch_size also without
#   the GIL, by _add_produced).
# - _sticky: written under _lock only (kc_store_int); read without it (kc_load_int), by
#   _sticky_partition's fast path, sticky_hint() (send_batch's walk, batch_send.pyx _Call._walk,
#   without the GIL) and _add_produced, while other threads switch it. A value read so is only a
#   hint: it may be -1, or >= the reader's own partition count (the topic grew since the reader
#   sized its arrays), and may have changed by the time it is used: the reader bounds-checks it
#   against its own count before indexing with it.
# - _produced: atomic (kc_load_i64/kc_store_i64), no lock: written by _switch_from (reset, under
#   _lock) and by _add_produced (from any number of threads at once, a load then a store): an
#   approximate counter. Lost or misattributed updates are harmless: it only decides when the
#   sticky partition switches.
# - _num_partitions: written under _lock (kc_store_int), read by the property (kc_load_int).
# nogil: _add_produced, sticky_hint (any thread, no lock); partition_for_key (pure).
# With a thread state (attached): _update_partitions, _sticky_partition, _next_partition,
# _switch_from (they take _lock).
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from kcore.atomic_impl cimport kc_load_int
from kcore.murmur cimport partition_of


cdef class BuiltInPartitioner:
    cdef public str topic
    cdef public Py_ssize_t sticky_batch_size
    cdef int _num_partitions
    cdef list _available
    cdef int _sticky                 # the sticky partition, -1 until one is chosen
    cdef int64_t _produced           # bytes appended to it since it was chosen
    cdef uint64_t _rng
    cdef cython.pymutex _lock

    cdef int _update_partitions(self, list available, int num_partitions) except -1
    cdef int _sticky_partition(self) except -1
    cdef int _next_partition(self) except -1
    cdef int _pick(self) except -1   # _lock held: a random partition other than _sticky
    # Count bytes appended to partition; true once the sticky partition is due to change.
    cdef bint _add_produced(self, int partition, Py_ssize_t appended_bytes) noexcept nogil
    # Move on from partition if it is still the sticky one; 1 if it was.
    cdef int _switch_from(self, int partition) except -1

    # The sticky partition as a hint (see _sticky above): any thread, no lock, no GIL.
    cdef inline int sticky_hint(self) noexcept nogil:
        return kc_load_int(&self._sticky)


# Java's BuiltInPartitioner.partitionForKey: (murmur2(key) & 0x7fffffff) % num_partitions.
cdef inline int32_t partition_for_key(const uint8_t* key, Py_ssize_t n,
                                      int32_t num_partitions) noexcept nogil:
    return partition_of(key, n, num_partitions)
