# BuiltInPartitioner (see builtin_partitioner.pyx): cimported by record_accumulator, send_path
# and batch_send.
#
# Threads (the one place these rules are written; builtin_partitioner.pyx points here). One
# partitioner per topic, shared by every caller thread. Each caller thread has a lane of its
# own (its sticky partition and the bytes produced to it), so that threads sending at once fill
# different partitions' batches rather than wait on one queue's append lock (free-threaded):
# - _owner[i]: the thread ident of lane i's owner, 0 while free: stored under _lock only, once
#   (_claim: a thread's first sticky partition), loaded without it (_lane). A lane is never given
#   back: a thread that ends leaves it to a later thread with the same ident. Once all _LANES are
#   owned (_lanes_full, atomic, set under _lock), other threads share the lane their ident hashes
#   to, as every thread shared one sticky partition before.
# - _lock (a PyMutex; a leaf: nothing else is taken under it, no Python code runs under it but
#   reading ints of `_available`): held by _update_partitions, _sticky_partition (once its lane
#   has no sticky partition), _next_partition and _switch_from, and the `available` property.
#   It guards _available, _num_partitions, _rng, _owner's and _lanes_full's writes and every
#   write of _lanes[i].sticky.
# - topic, sticky_batch_size: set in __init__, then only read (sticky_batch_size also without
#   the GIL, by _add_produced).
# - _lanes[i].sticky: written under _lock only (kc_store_int); read without it (kc_load_int), by
#   _sticky_partition's fast path, sticky_hint() (send_batch's walk, batch_send.pyx _Call._walk,
#   without the GIL) and _add_produced, while other threads switch it (a shared lane's, or
#   _update_partitions dropping it). A value read so is only a hint: it may be -1, or >= the
#   reader's own partition count (the topic grew since the reader sized its arrays), and may
#   have changed by the time it is used: the reader bounds-checks it against its own count
#   before indexing with it.
# - _lanes[i].produced: atomic (kc_load_i64/kc_store_i64), no lock: written by _switch_from (reset,
#   under _lock) and by _add_produced (a load then a store; a shared lane's from several
#   threads at once): an approximate counter. Lost or misattributed updates are harmless: it
#   only decides when the sticky partition switches.
# - _num_partitions: written under _lock (kc_store_int), read by the property (kc_load_int).
# nogil: _lane, _add_produced, sticky_hint (any thread, no lock); partition_for_key (pure).
# With a thread state (attached): _update_partitions, _sticky_partition, _next_partition,
# _switch_from (they take _lock).
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from kcore.atomic_impl cimport kc_load_int
from kcore.murmur cimport partition_of


cdef enum:
    _LANES = 8   # caller threads with a sticky partition of their own


cdef struct Lane:
    int sticky                       # the lane's sticky partition, -1 until one is chosen
    int64_t produced                 # bytes appended to it since it was chosen
    char _pad[112]  # a lane per cache line (128 bytes: whatever the object's alignment), or
    #                 every record's write to one thread's counter stalls the other threads


cdef class BuiltInPartitioner:
    cdef public str topic
    cdef public Py_ssize_t sticky_batch_size
    cdef int _num_partitions
    cdef list _available
    cdef int64_t _owner[_LANES]      # each lane's thread ident, 0 while free
    cdef Lane _lanes[_LANES]
    cdef int _lanes_full             # every lane has an owner: other threads share by ident
    cdef uint64_t _rng
    cdef cython.pymutex _lock

    # The calling thread's lane, or -1 if it has none yet (nor shares one).
    cdef int _lane(self) noexcept nogil
    cdef int _claim(self) noexcept   # _lock held: the calling thread's lane, claimed if new
    cdef int _update_partitions(self, list available, int num_partitions) except -1
    cdef int _sticky_partition(self) except -1
    cdef int _next_partition(self) except -1
    # _lock held: a random partition other than the lanes' sticky ones (lane: the caller's,
    # or -1)
    cdef int _pick(self, int lane) except -1
    # Count bytes appended to partition; true once the sticky partition is due to change.
    cdef bint _add_produced(self, int partition, Py_ssize_t appended_bytes) noexcept nogil
    # Move on from partition if it is still the calling thread's sticky one; 1 if it was.
    cdef int _switch_from(self, int partition) except -1

    # The calling thread's sticky partition as a hint (see _lanes[i].sticky above): any
    # thread, no lock, no GIL.
    cdef inline int sticky_hint(self) noexcept nogil:
        cdef int i = self._lane()
        return kc_load_int(&self._lanes[i].sticky) if i >= 0 else -1


# Java's BuiltInPartitioner.partitionForKey: (murmur2(key) & 0x7fffffff) % num_partitions.
cdef inline int32_t partition_for_key(const uint8_t* key, Py_ssize_t n,
                                      int32_t num_partitions) noexcept nogil:
    return partition_of(key, n, num_partitions)
