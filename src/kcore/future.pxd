# Per-batch result and per-record futures (see future.pyx); cimported by producer_batch.
#
# Threads (the one place these rules are written; future.pyx points here): the GIL only. No
# method is nogil and no field is read or written without the GIL; there is no lock.
# - ProduceRequestResult: base_offset, log_append_time, error, record_errors, is_done are set
#   once, by done() on the Sender thread (pieces too, by the Sender, before the batch is done);
#   any thread reads them. _thunks and _event are shared by caller threads (add_thunk, wait())
#   and done(): the GIL orders them, so between a check of is_done and the update that relies
#   on it nothing may run that can switch threads: Python code, or an allocation (it may run
#   the cycle collector and its finalizers): allocate first, then check and update.
#   _loop_calls (asyncio awaits, add_loop_call on a loop's thread) follows the same rule; done()
#   takes it after is_done is set and posts it to the loops' wakers, which lock their own state.
# - FutureRecordMetadata: fixed once made (new_future), but _value: the RecordMetadata, made by
#   the first thread that asks (two racing threads may each make one; they are equal).
from libc.stdint cimport int64_t


cdef class ProduceRequestResult:
    cdef public object topic_partition
    cdef public int64_t base_offset
    cdef public int64_t log_append_time
    cdef public object error
    cdef public object record_errors
    cdef public object pieces      # a split batch's: [(first index, count, piece's result)]
    cdef public bint is_done
    cdef object _event
    cdef list _thunks
    cdef list _loop_calls          # asyncio awaits: flat [waker, call, arg, ...]


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
