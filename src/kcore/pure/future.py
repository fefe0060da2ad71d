"""Futures, as the Java client does them: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a thin view on it (offset = base offset + its index), so
completing a batch costs nothing per record unless the record has callbacks (the Java Thunks).

The API is kafka-python's: is_done / value / exception, succeeded(), failed(), get(timeout),
add_callback / add_errback / add_both.
"""
import threading

from kcore._future import (BatchFuture, BatchMetadata, Future, RecordMetadata,  # noqa: F401
                                 TopicPartition, _Callbacks, _notify, _piece_of,
                                 _post_loop_calls, _timestamp_type, _waker_of)
from kcore.errors import KafkaTimeoutError

__all__ = ["TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata",
           "Future", "BatchFuture", "BatchMetadata"]


class ProduceRequestResult:
    """The outcome of one batch: set once, by the Sender thread. The Event that get() waits on
    is made only if somebody waits before it is done. _lock orders completion against the
    registrations (thunks, loop calls, the Event) and a record's first value (future.pxd)."""

    def __init__(self, topic_partition):
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error = None
        self.record_errors = None  # {batch index: exception}, from the broker's record_errors
        self.pieces = None  # split batch: [(first index, count, piece's result)]
        self.is_done = False
        self._event = None
        self._thunks = None  # [(future, callback, errback)] of records that asked for a call
        self._loop_calls = None  # flat [waker, call, arg, ...] of asyncio awaits
        self._lock = threading.Lock()

    def done(self, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        with self._lock:
            if self.is_done:
                return
            self.base_offset, self.log_append_time = base_offset, log_append_time
            self.error, self.record_errors = error, record_errors
            self.is_done = True
            thunks, self._thunks = self._thunks, None
            loop_calls, self._loop_calls = self._loop_calls, None
            event = self._event
        if event is not None:
            event.set()
        if loop_calls is not None:
            _post_loop_calls(loop_calls)
        for future, callback, errback in thunks or ():
            _notify(future, callback, errback)

    def wait(self, timeout=None):
        if self.is_done:
            return True
        event = threading.Event()  # made before the lock (Python code)
        with self._lock:
            if self.is_done:
                return True
            if self._event is None:
                self._event = event
            event = self._event
        return event.wait(timeout)

    def add_thunk(self, future, callback, errback):
        """Register a call for when the batch completes; False if it already has."""
        with self._lock:
            if self.is_done:
                return False
            if self._thunks is None:
                self._thunks = []
            self._thunks.append((future, callback, errback))
            return True

    def add_loop_call(self, loop, call, arg):
        """Run call(arg) on asyncio ``loop`` once done (batched with the other calls done by
        then: see kcore/_future.py); False (nothing registered) if done already."""
        waker = _waker_of(loop)
        with self._lock:
            if self.is_done:
                return False
            if self._loop_calls is None:
                self._loop_calls = []
            self._loop_calls += (waker, call, arg)
            return True


class FutureRecordMetadata(_Callbacks):
    """The future send() returns: a view of one record inside its batch's result."""
    __slots__ = ("_result", "_index", "_timestamp", "_key_size", "_value_size", "_header_size",
                 "_value")

    def __init__(self, result, index, timestamp_ms, key_size, value_size, header_size):
        self._result = result
        self._index = index
        self._timestamp = timestamp_ms
        self._key_size, self._value_size, self._header_size = key_size, value_size, header_size
        self._value = None

    @property
    def is_done(self):
        return self._result.is_done

    @property
    def exception(self):
        r = self._result
        if not r.is_done:
            return None
        if r.error is not None:
            return r.error
        if r.record_errors:
            return r.record_errors.get(self._index)
        return None

    @property
    def timestamp_type(self):
        return _timestamp_type(self._result, self._index)

    @property
    def value(self):
        r = self._result
        if self._value is None and r.is_done and self.exception is None:
            r, index = _piece_of(r, self._index) if r.pieces is not None else (r, self._index)
            ts = r.log_append_time if r.log_append_time != -1 else self._timestamp
            offset = r.base_offset + index if r.base_offset != -1 else -1
            tp = r.topic_partition
            value = RecordMetadata(tp[0], tp[1], tp, offset, ts, None, self._key_size,
                                   self._value_size, self._header_size)
            with self._result._lock:  # the first one stored wins (as compiled)
                if self._value is None:
                    self._value = value
        return self._value

    def get(self, timeout=None):
        if not self._result.wait(timeout):
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        exc = self.exception
        if exc is not None:
            raise exc
        return self.value

    def add_loop_call(self, loop, call, arg):
        return self._result.add_loop_call(loop, call, arg)

    def _add(self, callback, errback):
        if not self._result.add_thunk(self, callback, errback):
            _notify(self, callback, errback)
        return self
