# cython: binding=False
"""Compiled twin of kcore/pure/future.py: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a view on it. No lock: the GIL orders completion against
registration (thread rules: future.pxd).

Callbacks are kept flat in the result's ``_thunks``: ``[future, callback, errback, ...]``, one
entry of three per registration (an add_errback right after an add_callback on the same record
fills that entry's free slot). done() walks them in C, in registration order.

asyncio awaits register loop calls in ``_loop_calls`` (flat ``[waker, call, arg, ...]``), which
done() hands to their loops' wakers (kcore/shared/future.py): one wakeup per loop per Sender
pass. A batch nobody awaits pays one pointer test."""
cimport cython
from cpython.object cimport PyObject, PyTypeObject, newfunc
from libc.stdint cimport int64_t

import threading

from kcore.errors import KafkaTimeoutError

include "shared/future.py"  # the result types, Future and BatchFuture, compiled in here

__all__ = ["TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata",
           "Future", "BatchFuture", "BatchMetadata"]

# RecordMetadata(...) runs the namedtuple's Python __new__; its body is tuple.__new__(cls, t),
# which _metadata calls in C (tuple's tp_new takes the args of tuple(t)).
cdef newfunc _tuple_new = (<PyTypeObject*>tuple).tp_new
cdef type _RecordMetadata = RecordMetadata


cdef class ProduceRequestResult:
    """The outcome of one batch: set once (by the Sender thread: see future.pxd)."""

    def __init__(self, topic_partition):
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1

    def done(self, int64_t base_offset=-1, int64_t log_append_time=-1, error=None,
             record_errors=None):
        cdef list thunks
        if self.is_done:
            return
        self.base_offset, self.log_append_time = base_offset, log_append_time
        self.error, self.record_errors = error, record_errors
        self.is_done = True
        thunks, self._thunks = self._thunks, None
        loop_calls, self._loop_calls = self._loop_calls, None
        if self._event is not None:
            self._event.set()
        if loop_calls is not None:
            _post_loop_calls(loop_calls)
        if thunks:
            _run_thunks(self, thunks)

    def wait(self, timeout=None):
        if self.is_done:
            return True
        event = threading.Event()  # may switch threads: check again after
        if self._event is None:
            self._event = event
        event = self._event
        if self.is_done:
            return True
        return event.wait(timeout)

    def add_thunk(self, FutureRecordMetadata future not None, callback, errback):
        """Register a call for when the batch completes; False if it already has."""
        return _register(self, future, callback, errback)

    def add_loop_call(self, loop, call, arg):
        """Run call(arg) on asyncio ``loop`` once done (batched with the other calls done by
        then); False (nothing registered) if done already."""
        return _register_loop_call(self, _waker_of(loop), call, arg)


cdef list _registration(ProduceRequestResult r, bint loop_calls):
    """r's thunks (or loop calls) to append to, made if need be; None if r is done.
    Allocations may run the GC, whose finalizers may let the Sender thread complete the
    batch: allocate first, then check and return with no allocation in between (list appends
    and item stores do not run the GC either)."""
    cdef list fresh = [] if (r._loop_calls if loop_calls else r._thunks) is None else None
    if r.is_done:
        return None
    if loop_calls:
        if r._loop_calls is None:
            r._loop_calls = fresh
        return r._loop_calls
    if r._thunks is None:
        r._thunks = fresh
    return r._thunks


cdef bint _register_loop_call(ProduceRequestResult r, waker, call, arg) except -1:
    """Append (waker, call, arg) to r's loop calls; False if r is done."""
    cdef list calls = _registration(r, True)
    if calls is None:
        return False
    calls.append(waker)
    calls.append(call)
    calls.append(arg)
    return True


cdef bint _register(ProduceRequestResult r, future, callback, errback) except -1:
    """Append (future, callback, errback) to r's thunks; False if r is done already."""
    cdef list thunks = _registration(r, False)
    cdef Py_ssize_t n
    if thunks is None:
        return False
    n = len(thunks)
    if n and thunks[n - 3] is future:  # the same record again: fill a free slot
        if callback is None and thunks[n - 1] is None:
            thunks[n - 1] = errback
            return True
        if errback is None and thunks[n - 2] is None:
            thunks[n - 2] = callback
            return True
    thunks.append(future)
    thunks.append(callback)
    thunks.append(errback)
    return True


cdef _run_thunks(ProduceRequestResult r, list thunks):
    """Each registered record's callback (on success) or errback, in registration order."""
    cdef Py_ssize_t i
    cdef FutureRecordMetadata f
    error, record_errors = r.error, r.record_errors or None
    for i in range(0, len(thunks), 3):
        f = <FutureRecordMetadata>thunks[i]
        exc = error if error is not None or record_errors is None else record_errors.get(f._index)
        if exc is None:
            call, arg = thunks[i + 1], None
            if call is not None:
                arg = _metadata(f)
        else:
            call, arg = thunks[i + 2], exc
        if call is not None:
            try:
                call(arg)
            except Exception:
                log.exception("Error in producer callback %r", call)


cdef _exception(FutureRecordMetadata f):
    cdef ProduceRequestResult r = f._result
    if not r.is_done:
        return None
    if r.error is not None:
        return r.error
    if r.record_errors:
        return r.record_errors.get(f._index)
    return None


cdef _metadata(FutureRecordMetadata f):
    """The RecordMetadata of a record of a done batch that succeeded (made once)."""
    cdef ProduceRequestResult r = f._result
    cdef int64_t index = f._index
    if f._value is None:
        if r.pieces is not None:
            r, index = _piece_of(r, index)
        ts = r.log_append_time if r.log_append_time != -1 else f._timestamp
        offset = r.base_offset + index if r.base_offset != -1 else -1
        tp = r.topic_partition  # a TopicPartition: index it as a tuple (its __getitem__ is slow)
        t = tp if isinstance(tp, tuple) else tuple(tp)
        args = (((<tuple>t)[0], (<tuple>t)[1], tp, offset, ts, None, f._key_size,
                 f._value_size, f._header_size),)
        f._value = _tuple_new(_RecordMetadata, <PyObject*>args, NULL)
    return f._value


@cython.freelist(256)
@cython.no_gc
cdef class FutureRecordMetadata:
    """The future send() returns: a view of one record inside its batch's result.

    Not tracked by the GC: with a callback, every record's future lives until its batch
    completes, and tracking them made the GC scan the in-flight futures over and over (a
    quarter of the CPU of a callback on every record). The only cycle through a future is
    result -> _thunks -> future (-> callback) -> result, which done() breaks."""

    def __init__(self, ProduceRequestResult result, int64_t index, int64_t timestamp_ms,
                 int64_t key_size, int64_t value_size, int64_t header_size):
        self._result, self._index, self._timestamp = result, index, timestamp_ms
        self._key_size, self._value_size, self._header_size = key_size, value_size, header_size

    @property
    def is_done(self):
        return self._result.is_done

    @property
    def exception(self):
        return _exception(self)

    @property
    def timestamp_type(self):
        return _timestamp_type(self._result, self._index)

    @property
    def value(self):
        if self._result.is_done and _exception(self) is None:
            return _metadata(self)
        return None

    def succeeded(self):
        return self._result.is_done and _exception(self) is None

    def failed(self):
        return self._result.is_done and _exception(self) is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def get(self, timeout=None):
        if not self._result.is_done and not self._result.wait(timeout):
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        exc = _exception(self)
        if exc is not None:
            raise exc
        return _metadata(self)

    # kafka-python's trio (kcore/shared/future.py's _Callbacks for the pure twin), with no
    # Python-level call on the way to the batch's thunks
    def add_callback(self, f, *args, **kwargs):
        return _add(self, _partial(f, args, kwargs) if args or kwargs else f, None)

    def add_errback(self, f, *args, **kwargs):
        return _add(self, None, _partial(f, args, kwargs) if args or kwargs else f)

    def add_both(self, f, *args, **kwargs):
        f = _partial(f, args, kwargs) if args or kwargs else f
        return _add(self, f, f)

    def add_loop_call(self, loop, call, arg):
        return _register_loop_call(self._result, _waker_of(loop), call, arg)

    def __await__(self):
        return _await(self)


cdef _add(FutureRecordMetadata future, callback, errback):
    """Register for when the batch completes, or call now if it has."""
    if not _register(future._result, future, callback, errback):
        _notify(future, callback, errback)
    return future


cdef FutureRecordMetadata new_future(ProduceRequestResult result, int64_t index,
                                     int64_t timestamp_ms, int64_t key_size, int64_t value_size,
                                     int64_t header_size):
    cdef FutureRecordMetadata f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f._result, f._index, f._timestamp = result, index, timestamp_ms
    f._key_size, f._value_size, f._header_size = key_size, value_size, header_size
    return f
