# cython: binding=False
"""Compiled twin of kcore/pure/future.py: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a view on it. The GIL orders completion against
registration here (nothing that can switch threads runs between a check and its update), so no
lock is needed."""
cimport cython
from libc.stdint cimport int64_t

import threading

from pyprod.errors import KafkaTimeoutError

include "shared/future.py"  # the result types, Future and BatchFuture, compiled in here

__all__ = ["TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata",
           "Future", "BatchFuture", "BatchMetadata"]


cdef class ProduceRequestResult:
    """The outcome of one batch: set once, by the Sender thread."""

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
        if self._event is not None:
            self._event.set()
        if thunks:
            for future, callback, errback in thunks:
                _notify(future, callback, errback)

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

    def add_thunk(self, future, callback, errback):
        """Register a call for when the batch completes; False if it already has."""
        # Allocations may run the GC, whose finalizers may let the Sender thread complete the
        # batch: allocate first, then check and register with no allocation in between.
        cdef tuple entry = (future, callback, errback)
        cdef list fresh = None
        if self._thunks is None:
            fresh = [entry]
        if self.is_done:
            return False
        if self._thunks is None:
            self._thunks = fresh if fresh is not None else [entry]
        else:
            self._thunks.append(entry)  # a list append does not run the GC
        return True


@cython.freelist(256)
cdef class FutureRecordMetadata:
    """The future send() returns: a view of one record inside its batch's result."""

    def __init__(self, ProduceRequestResult result, int64_t index, int64_t timestamp_ms,
                 int64_t key_size, int64_t value_size, int64_t header_size):
        self._result, self._index, self._timestamp = result, index, timestamp_ms
        self._key_size, self._value_size, self._header_size = key_size, value_size, header_size

    @property
    def is_done(self):
        return self._result.is_done

    @property
    def exception(self):
        cdef ProduceRequestResult r = self._result
        if not r.is_done:
            return None
        if r.error is not None:
            return r.error
        if r.record_errors:
            return r.record_errors.get(self._index)
        return None

    @property
    def value(self):
        cdef ProduceRequestResult r = self._result
        cdef int64_t index = self._index
        if self._value is None and r.is_done and self.exception is None:
            if r.pieces is not None:
                r, index = _piece_of(r, index)
            ts = r.log_append_time if r.log_append_time != -1 else self._timestamp
            offset = r.base_offset + index if r.base_offset != -1 else -1
            tp = r.topic_partition
            self._value = RecordMetadata(tp[0], tp[1], tp, offset, ts, None, self._key_size,
                                         self._value_size, self._header_size)
        return self._value

    def succeeded(self):
        return self._result.is_done and self.exception is None

    def failed(self):
        return self._result.is_done and self.exception is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def get(self, timeout=None):
        if not self._result.is_done and not self._result.wait(timeout):
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        exc = self.exception
        if exc is not None:
            raise exc
        return self.value

    def _add(self, callback, errback):
        if not self._result.add_thunk(self, callback, errback):
            _notify(self, callback, errback)
        return self

    def add_callback(self, f, *args, **kwargs):
        return self._add(_partial(f, args, kwargs), None)

    def add_errback(self, f, *args, **kwargs):
        return self._add(None, _partial(f, args, kwargs))

    def add_both(self, f, *args, **kwargs):
        f = _partial(f, args, kwargs)
        return self._add(f, f)


cdef FutureRecordMetadata new_future(ProduceRequestResult result, int64_t index,
                                     int64_t timestamp_ms, int64_t key_size, int64_t value_size,
                                     int64_t header_size):
    cdef FutureRecordMetadata f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f._result, f._index, f._timestamp = result, index, timestamp_ms
    f._key_size, f._value_size, f._header_size = key_size, value_size, header_size
    return f
