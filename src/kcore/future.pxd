# Per-batch result and per-record futures (see future.pyx); cimported by producer_batch.
#
# Threads (the one place these rules are written; future.pyx points here). No method is nogil
# but done_c(); "attached" threads run the rest, any number at once on a free-threaded build.
# - ProduceRequestResult: base_offset, log_append_time, error, record_errors are set once, by
#   done() under _lock, before _done; pieces too, by the Sender, before the batch is done (its
#   pieces done first, on that thread). _done (atomic) is published by done() with a release
#   store after them and read with done_c() (acquire) by any thread; these fields are read only
#   once _done was seen (or under _lock), never written after it.
#   _lock (a cython.pymutex, a leaf: nothing is taken under it) guards _done's test-and-set in
#   done() and _thunks, _loop_calls, _event: registrations (add_thunk, the records'
#   add_callback..., add_loop_call, wait()'s Event) test _done and append under it, and done()
#   sets _done and takes the lists and the Event under it, so a registration is either in what
#   done() took or sees _done (exactly one done() completes). Under _lock: no allocation (it
#   may run the GC, whose finalizers may register here), no Python code, no freeing decref;
#   lists and the Event are made before it, the callbacks and loop posts run after it.
#   Before 3.13 (GIL builds only) the lock is not taken: the GIL makes those sections atomic.
# - FutureRecordMetadata: fixed once made (new_future), but _value: the RecordMetadata, made by
#   the first thread that asks once the batch is done and stored under a critical section on
#   the future (a no-op with the GIL) only if still unset; it is never replaced after.
# - AioFutures, AioRecordFuture (future.pyx only; asyncio's futures): the loop's thread alone
#   reads and writes them; other threads reach them only through a result's loop calls, which
#   done() posts to the loop's waker. Their done() reads the results with done_c().
cimport cython
from libc.stdint cimport int64_t

from kcore.atomic_impl cimport kc_load_int_acquire


cdef class ProduceRequestResult:
    cdef public object topic_partition
    cdef public int64_t base_offset
    cdef public int64_t log_append_time
    cdef public object error
    cdef public object record_errors
    cdef public object pieces      # a split batch's: [(first index, count, piece's result)]
    cdef int _done                 # atomic (0 or 1): is_done (Python), done_c() (C)
    cdef cython.pymutex _lock
    cdef object _event
    cdef list _thunks
    cdef list _loop_calls          # asyncio awaits: flat [waker, call, arg, ...]

    # is_done for C callers (any thread): once true, the fields done() set are visible
    cdef inline bint done_c(self) noexcept nogil:
        return kc_load_int_acquire(&self._done)


cdef class FutureRecordMetadata:
    cdef ProduceRequestResult _result
    cdef int64_t _index
    cdef int64_t _timestamp
    cdef int64_t _key_size, _value_size, _header_size
    cdef object _value


# A future for record `index` of `result` (the hot path: no Python-level __init__).
cdef FutureRecordMetadata new_future(ProduceRequestResult result, int64_t index,
                                     int64_t timestamp_ms, int64_t key_size, int64_t value_size,
                                     int64_t header_size)
