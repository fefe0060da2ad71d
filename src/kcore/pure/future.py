"""Futures, as the Java client does them: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a thin view on it (offset = base offset + its index), so
completing a batch costs nothing per record unless the record has callbacks (the Java Thunks).

The API is kafka-python's: is_done / value / exception, succeeded(), failed(), get(timeout),
add_callback / add_errback / add_both.
"""
import contextvars
import threading

from kcore._future import (BatchFuture, BatchMetadata, Future, RecordMetadata,  # noqa: F401
                                 TopicPartition, _Callbacks, _notify, _piece_of,
                                 _post_loop_calls, _timestamp_type, _waker_of)
from kcore.errors import KafkaTimeoutError

__all__ = ["TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata",
           "Future", "BatchFuture", "BatchMetadata", "AioFutures", "AioRecordFuture"]


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


# -- asyncio: a record's asyncio future (pyprod.aio's RecordFuture; compiled in future.pyx) -----
class AioFutures:
    """The asyncio futures of one loop's records (kcore/_future.py's asyncio section): what they
    share (the loop, its waker, the result type, the error translation) and the callbacks added
    to done futures, run soon in one loop callback per pass (no Handle per record)."""
    __slots__ = ("loop", "_waker", "_metadata_type", "_translate", "_no_ack", "_soon")

    def __init__(self, loop, metadata_type, translate, no_ack=False):
        self.loop, self._waker = loop, _waker_of(loop)
        self._metadata_type, self._translate, self._no_ack = metadata_type, translate, no_ack
        self._soon = []  # flat [fn, future, context, ...]

    def wrap(self, future, first=None):
        """The asyncio future of ``future`` (of a send_batch: done with its first record too,
        whose metadata it gives)."""
        f = AioRecordFuture.__new__(AioRecordFuture)
        f._owner, f._future, f._first = self, future, first
        f._callbacks = f._value = f._exception = None
        f._settled = f._cancelled = f._asyncio_future_blocking = False
        return f

    def _add_soon(self, fn, future, context):
        soon = self._soon
        soon += (fn, future, context)
        if len(soon) == 3:
            try:
                self.loop.call_soon(self._run)
            except BaseException:  # a closed loop: as asyncio's add_done_callback
                soon.clear()
                raise

    def _run(self):
        soon, self._soon = self._soon, []
        for i in range(0, len(soon), 3):
            _run_in(soon[i], soon[i + 1], soon[i + 2])


def _run_in(fn, future, context):
    """fn(future) as a Handle runs it: in context, an exception to the loop's handler."""
    try:
        context.run(fn, future)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        future._owner.loop.call_exception_handler({
            "message": "Exception in callback %r" % (fn,), "exception": exc, "future": future})


def _aio_wake(future):
    """On the loop (a batched loop call): the record's batch completed."""
    if future._cancelled:
        return
    if not future.done() and future._listen():  # a batch's first record still waits
        return
    callbacks, future._callbacks = future._callbacks or [], None
    for i in range(0, len(callbacks), 2):
        _run_in(callbacks[i], future, callbacks[i + 1])


class AioRecordFuture:
    """One record's (or send_batch call's) asyncio future: asyncio.isfuture is true, and await,
    gather, wait, wait_for and callbacks work as on asyncio.Future. It registers with the batch
    only when somebody waits; done() turns true when the batch completes (any thread), callbacks
    run on the loop. cancel() does not stop the record. Loop thread only (future.pxd)."""
    __slots__ = ("_owner", "_future", "_first", "_callbacks", "_value", "_exception",
                 "_settled", "_cancelled", "_asyncio_future_blocking", "__weakref__")

    def __init__(self):
        raise TypeError("made by AioFutures.wrap()")

    def _listen(self):
        """Have the loop run _aio_wake(self) when the batch completes; False if it has."""
        waiting = self._future
        if self._first is not None and waiting.is_done:
            waiting = self._first
        return waiting._result.add_loop_call(self._owner.loop, _aio_wake, self)

    def _settle(self):
        """Make the outcome of a done future once (asyncio's errors otherwise)."""
        if self._cancelled:
            raise _asyncio().CancelledError()
        if self._settled:
            return
        if not self.done():
            raise _asyncio().InvalidStateError("Result is not ready.")
        for f in (self._first, self._future):
            if f is not None and f.exception is not None:
                self._exception = self._owner._translate(f.exception)
                break
        if self._exception is None and not self._owner._no_ack:
            self._value = _aio_metadata(self._owner._metadata_type, self._first or self._future)
        self._settled = True

    def done(self):
        return self._cancelled or (self._future.is_done and
                                   (self._first is None or self._first.is_done))

    def cancelled(self):
        return self._cancelled

    def result(self):
        if not self._settled or self._cancelled:
            self._settle()
        if self._exception is not None:
            raise self._exception
        return self._value

    def exception(self):
        if not self._settled or self._cancelled:
            self._settle()
        return self._exception

    def get_loop(self):
        return self._owner.loop

    def add_done_callback(self, fn, *, context=None):
        if context is None:
            context = contextvars.copy_context()
        if self._callbacks is not None:  # registered: the wake runs them, in order
            self._callbacks += (fn, context)
        elif self.done() or not self._listen():
            self._owner._add_soon(fn, self, context)
        else:
            self._callbacks = [fn, context]

    def remove_done_callback(self, fn):
        callbacks = self._callbacks
        if not callbacks:
            return 0
        kept = [x for i in range(0, len(callbacks), 2) if callbacks[i] != fn
                for x in callbacks[i:i + 2]]
        removed = (len(callbacks) - len(kept)) // 2
        callbacks[:] = kept
        return removed

    def cancel(self, msg=None):
        """Mark it cancelled and schedule its callbacks (the record is not stopped)."""
        if self.done():
            return False
        callbacks, self._callbacks, self._cancelled = self._callbacks or (), None, True
        for i in range(0, len(callbacks), 2):
            self._owner.loop.call_soon(callbacks[i], self, context=callbacks[i + 1])
        return True

    def __await__(self):
        if not self.done():
            self._asyncio_future_blocking = True
            yield self
            if not self.done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self):
        state = "cancelled" if self._cancelled else "finished" if self.done() else "pending"
        return "<%s %s>" % (type(self).__name__, state)


def _aio_metadata(metadata_type, f):
    """aiokafka's RecordMetadata of a record of a done batch that succeeded (timestamp_type 1:
    the broker's LogAppendTime; log_start_offset None)."""
    r, index = _piece_of(f._result, f._index)
    tp = r.topic_partition
    return metadata_type(tp[0], tp[1], tp, r.base_offset + index if r.base_offset != -1 else -1,
                         r.log_append_time if r.log_append_time != -1 else f._timestamp,
                         1 if r.log_append_time != -1 else 0, None)


def _asyncio():
    import asyncio  # only a failed or early result() pays for asyncio's import
    return asyncio
