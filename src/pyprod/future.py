"""Futures, as the Java client does them: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a thin view on it (offset = base offset + its index), so
completing a batch costs nothing per record unless the record has callbacks (the Java Thunks).

The API is kafka-python's: is_done / value / exception, succeeded(), failed(), get(timeout),
add_callback / add_errback / add_both.
"""
import collections
import functools
import logging
import threading

from pyprod.errors import KafkaTimeoutError

log = logging.getLogger(__name__)

TopicPartition = collections.namedtuple("TopicPartition", ["topic", "partition"])

RecordMetadata = collections.namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "checksum",
    "serialized_key_size", "serialized_value_size", "serialized_header_size"])


def _run(f, arg):
    try:
        f(arg)
    except Exception:
        log.exception("Error in producer callback %r", f)


class ProduceRequestResult:
    """The outcome of one batch: set once, by the Sender thread."""
    __slots__ = ("topic_partition", "base_offset", "log_append_time", "error", "record_errors",
                 "is_done", "_event", "_thunks", "_lock")

    def __init__(self, topic_partition):
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error = None
        self.record_errors = None  # {batch index: exception}, from the broker's record_errors
        self.is_done = False
        self._event = threading.Event()
        self._thunks = []  # (future, callback, errback) of records that asked for a call
        self._lock = threading.Lock()

    def done(self, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        with self._lock:
            if self.is_done:
                return
            self.base_offset, self.log_append_time = base_offset, log_append_time
            self.error, self.record_errors = error, record_errors
            self.is_done = True
            thunks, self._thunks = self._thunks, None
        self._event.set()
        for future, callback, errback in thunks:
            exc = future.exception
            if exc is None:
                if callback is not None:
                    _run(callback, future.value)
            elif errback is not None:
                _run(errback, exc)

    def wait(self, timeout=None):
        return self._event.wait(timeout)

    def _add(self, future, callback, errback):
        """Register a thunk; False if already done (the caller runs it)."""
        with self._lock:
            if self.is_done:
                return False
            self._thunks.append((future, callback, errback))
            return True


class Future:
    """kafka-python's kafka.future.Future, for errors raised before a batch exists."""
    __slots__ = ("is_done", "value", "exception", "_callbacks", "_errbacks")

    def __init__(self):
        self.is_done, self.value, self.exception = False, None, None
        self._callbacks, self._errbacks = [], []

    def succeeded(self):
        return self.is_done and self.exception is None

    def failed(self):
        return self.is_done and self.exception is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def success(self, value):
        self.value, self.is_done = value, True
        for f in self._callbacks:
            _run(f, value)
        return self

    def failure(self, e):
        self.exception, self.is_done = (e() if isinstance(e, type) else e), True
        for f in self._errbacks:
            _run(f, self.exception)
        return self

    def add_callback(self, f, *args, **kwargs):
        f = functools.partial(f, *args, **kwargs) if args or kwargs else f
        if not self.is_done:
            self._callbacks.append(f)
        elif self.exception is None:
            _run(f, self.value)
        return self

    def add_errback(self, f, *args, **kwargs):
        f = functools.partial(f, *args, **kwargs) if args or kwargs else f
        if not self.is_done:
            self._errbacks.append(f)
        elif self.exception is not None:
            _run(f, self.exception)
        return self

    def add_both(self, f, *args, **kwargs):
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def get(self, timeout=None):
        if not self.is_done:
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        if self.exception is not None:
            raise self.exception
        return self.value


class FutureRecordMetadata:
    """The future send() returns: a view of one record inside its batch's result."""
    __slots__ = ("_result", "_index", "_timestamp", "_sizes", "_value")

    def __init__(self, result, index, timestamp_ms, key_size, value_size, header_size):
        self._result = result
        self._index = index
        self._timestamp = timestamp_ms
        self._sizes = (key_size, value_size, header_size)
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
    def value(self):
        r = self._result
        if self._value is None and r.is_done and self.exception is None:
            ts = r.log_append_time if r.log_append_time != -1 else self._timestamp
            offset = r.base_offset + self._index if r.base_offset != -1 else -1
            tp = r.topic_partition
            self._value = RecordMetadata(tp[0], tp[1], tp, offset, ts, None, *self._sizes)
        return self._value

    def succeeded(self):
        return self.is_done and self.exception is None

    def failed(self):
        return self.is_done and self.exception is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def get(self, timeout=None):
        if not self._result.wait(timeout):
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        exc = self.exception
        if exc is not None:
            raise exc
        return self.value

    def _add(self, callback, errback):
        if not self._result._add(self, callback, errback):
            exc = self.exception
            if exc is None:
                if callback is not None:
                    _run(callback, self.value)
            elif errback is not None:
                _run(errback, exc)
        return self

    def add_callback(self, f, *args, **kwargs):
        return self._add(functools.partial(f, *args, **kwargs) if args or kwargs else f, None)

    def add_errback(self, f, *args, **kwargs):
        return self._add(None, functools.partial(f, *args, **kwargs) if args or kwargs else f)

    def add_both(self, f, *args, **kwargs):
        f = functools.partial(f, *args, **kwargs) if args or kwargs else f
        return self._add(f, f)
