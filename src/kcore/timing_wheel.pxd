# Hierarchical timing wheel (Kafka's TimingWheel), O(1) add/cancel, never fires early.
# C-level API for other kcore modules (GIL held: items are Python objects):
#     h = wheel.add_c(deadline_ms, item); wheel.cancel_c(h); fired = wheel.advance_c(now_ms)
#     if wheel.next_deadline_c(&ms): ...   # earliest pending expiry
# Threads (the one place these rules are written): one thread per wheel (the SenderLoop's: the
# Sender thread), with the GIL; no lock, no nogil method, no field read without the GIL. Dropping
# an item may run Python code (a finalizer): _release finishes the bookkeeping before it.
from libc.stdint cimport int32_t, int64_t, uint32_t

cdef enum:
    TW_MAX_LEVELS = 64


cdef class TimingWheel:
    # Time is counted in ticks since start_ms; a deadline d is due at tick
    # T = ceil((d - start_ms) / tick_ms) and fires on the first advance reaching it.
    cdef readonly int64_t tick_ms
    cdef readonly int64_t start_ms
    cdef readonly int64_t now_ms     # latest time passed to advance (start_ms at first)
    cdef readonly int32_t wheel_size
    cdef int64_t cur                 # current tick
    cdef int nlevels
    cdef int64_t unit[TW_MAX_LEVELS] # ticks per bucket at each level
    cdef int64_t span[TW_MAX_LEVELS] # ticks per wheel turn, -1 = unbounded (top level)
    # Buckets: 0 = items already due at add(), 1 + level * wheel_size + slot = wheel buckets.
    cdef int32_t* bhead
    cdef int32_t* btail
    cdef int64_t* bexp               # bucket expiry tick while in the heap, else -1
    cdef int32_t nbuckets
    cdef int32_t* heap               # min-heap of bucket ids by (bexp, id)
    cdef int32_t hn
    # Entries (doubly linked in their bucket); free ones chained through enext.
    cdef int32_t* enext
    cdef int32_t* eprev
    cdef int32_t* ebucket            # -1 = free
    cdef int64_t* etick
    cdef uint32_t* egen              # generation, part of the handle
    cdef int32_t ecap
    cdef int32_t efree
    cdef list items                  # items[entry], None when free
    cdef Py_ssize_t count
    cdef int64_t ready_min           # earliest deadline in bucket 0

    # Handle (> 0) of a new entry; OverflowError if |deadline_ms| >= 2**62.
    cdef int64_t add_c(self, int64_t deadline_ms, object item) except -1
    # True if the entry was pending (it will never fire), False if fired/cancelled/unknown.
    cdef bint cancel_c(self, int64_t handle) noexcept
    # Items due at now_ms (plus those added already due), in due-tick order.
    cdef list advance_c(self, int64_t now_ms)
    # False when empty, else out[0] = a time <= every pending item's due time.
    cdef bint next_deadline_c(self, int64_t* out) noexcept
    cdef int _place(self, int32_t e) except -1
    cdef void _link(self, int32_t e, int32_t b) noexcept
    cdef void _unlink(self, int32_t e) noexcept
    cdef void _release(self, int32_t e) noexcept
    cdef int _grow_entries(self) except -1
    cdef int _add_level(self) except -1
    cdef void _heap_push(self, int32_t b) noexcept
    cdef int32_t _heap_pop(self) noexcept
