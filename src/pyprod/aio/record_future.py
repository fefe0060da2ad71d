"""RecordFuture: what AIOKafkaProducer.send() returns, an asyncio future over a kcore future.

aiokafka's send() returns an asyncio.Future; this is one by duck type (``asyncio.isfuture`` is
true: await, asyncio.wait / gather / wait_for, add_done_callback, result(), cancel() all work)
without being one per record in asyncio's machinery: it registers with the record's batch only
when somebody waits on it (await or add_done_callback), and its loop is woken through kcore's
batched loop calls (one wakeup per Sender pass, kcore/_future.py), whose loop callback runs
the records' callbacks itself; callbacks added to done futures run soon in one loop callback
(_Soon), so gathering a window of acknowledged records makes no Handle per record. A record
nobody waits for costs this object and nothing else.

done() reads the batch's state, which the Sender thread sets: it turns true as soon as the
record is acknowledged; callbacks run on the loop. Cancelling it does not stop the record
(aiokafka's rule: cancel the send() call instead).
"""
from __future__ import annotations

import asyncio
import collections
import contextvars
import weakref
from collections.abc import Callable, Generator
from typing import Any

from pyprod.aio.errors import translate

__all__ = ["RecordFuture", "RecordMetadata"]

# aiokafka's RecordMetadata (aiokafka.structs): timestamp_type 0 CreateTime, 1 LogAppendTime;
# log_start_offset is None (pyprod does not keep it).
RecordMetadata = collections.namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "timestamp_type",
    "log_start_offset"], module=__name__)
_new_metadata = tuple.__new__  # RecordMetadata(*fields) without its Python __new__


def _call(fn, future, context):
    """fn(future) as a Handle runs it: in its context (a copy of the current one when none was
    given), an exception going to the loop's exception handler."""
    try:
        (context or contextvars.copy_context()).run(fn, future)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        future._loop.call_exception_handler({
            "message": "Exception in callback %r" % (fn,), "exception": exc, "future": future})


class _Soon:
    """One loop's callbacks added to done RecordFutures: run soon, in order, in one loop
    callback (asyncio.gather of 10,000 done futures: one Handle, not 10,000). It holds its
    loop weakly (a closed loop and its _Soon go together)."""

    __slots__ = ("_loop", "calls")

    def __init__(self, loop):
        try:
            self._loop = weakref.ref(loop)
        except TypeError:  # a loop type without weak references: held (and not cached)
            self._loop = lambda: loop
        self.calls = []

    def add(self, fn, future, context):
        calls = self.calls
        calls.append((fn, future, context))
        if len(calls) == 1:
            try:  # the future holds the loop: it is alive
                self._loop().call_soon(self._run)
            except BaseException:  # a closed loop: as asyncio's add_done_callback
                calls.clear()
                raise

    def _run(self):
        calls, self.calls = self.calls, []
        for fn, future, context in calls:
            _call(fn, future, context)


_soons = weakref.WeakKeyDictionary()  # loop -> its _Soon
_last_soon = [None]  # the last one asked for: most programs have one loop


def _soon(loop):
    last = _last_soon[0]
    if last is not None and last._loop() is loop:
        return last
    try:
        soon = _soons.get(loop)
        if soon is None:
            soon = _soons[loop] = _Soon(loop)
    except TypeError:
        return _Soon(loop)
    _last_soon[0] = soon
    return soon


class RecordFuture:
    """One record's (or one send_batch call's) future; see the module doc."""

    __slots__ = ("_future", "_first", "_loop", "_callbacks", "_cancelled", "_outcome",
                 "_no_ack", "_asyncio_future_blocking", "__weakref__")

    def __init__(self, future, loop, no_ack=False, first=None):
        """future: the kcore future that completes it; first: for a batch, the kcore future
        of its first record, whose metadata it gives (None: future's own); no_ack: acks=0,
        whose result is None (aiokafka's)."""
        self._future = future
        self._first = first
        self._loop = loop
        self._callbacks = None   # [(fn, context)] once somebody waits
        self._cancelled = False
        self._outcome = None     # (value, exception), made once
        self._no_ack = no_ack
        self._asyncio_future_blocking = False

    # -- asyncio.Future's API ------------------------------------------------------------------
    def done(self) -> bool:
        return self._cancelled or (self._future.is_done and
                                   (self._first is None or self._first.is_done))

    def cancelled(self) -> bool:
        return self._cancelled

    def result(self) -> RecordMetadata:
        outcome = self._outcome  # made once; _settled() only the first time (or cancelled)
        value, exc = outcome if outcome is not None and not self._cancelled else \
            self._settled()
        if exc is not None:
            raise exc
        return value

    def exception(self) -> BaseException | None:
        outcome = self._outcome
        return (outcome if outcome is not None and not self._cancelled else self._settled())[1]

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def add_done_callback(self, fn: Callable[[RecordFuture], object], *,
                          context: Any = None) -> None:
        if self.done():
            _soon(self._loop).add(fn, self, context)
            return
        if self._callbacks is None:
            self._callbacks = []
            if not self._register():
                _soon(self._loop).add(fn, self, context)
                return
        self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[RecordFuture], object]) -> int:
        kept = [(f, c) for f, c in self._callbacks or () if f != fn]
        removed = len(self._callbacks or ()) - len(kept)
        if self._callbacks is not None:
            self._callbacks[:] = kept
        return removed

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        self._cancelled = True
        self._schedule_callbacks()
        return True

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self
            if not self.done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__

    def __repr__(self):
        state = "cancelled" if self._cancelled else "finished" if self.done() else "pending"
        return "<pyprod.aio.RecordFuture %s>" % state

    # -- inside ----------------------------------------------------------------------------
    def _register(self):
        """Have the loop call _wake when the kcore future completes; False if it has."""
        waiting = self._future
        if self._first is not None and waiting.is_done:
            waiting = self._first
        return waiting.add_loop_call(self._loop, RecordFuture._wake, self)

    def _wake(self):
        """On the loop: the kcore future completed (a batch's first record may still wait).
        Already a loop callback (kcore's batched one), it runs the callbacks now, in order,
        rather than one call_soon each: no Handle and no extra loop pass per record."""
        if self._cancelled:
            return
        if not self.done() and self._register():
            return
        callbacks, self._callbacks = self._callbacks or (), []
        for fn, context in callbacks:
            _call(fn, self, context)

    def _schedule_callbacks(self):
        callbacks, self._callbacks = self._callbacks or (), []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)

    def _settled(self):
        """(value, exception) of a done future (asyncio's errors otherwise)."""
        if self._cancelled:
            raise asyncio.CancelledError()
        if self._outcome is None:
            if not self.done():
                raise asyncio.InvalidStateError("Result is not ready.")
            self._outcome = self._make_outcome()
        return self._outcome

    def _make_outcome(self):
        futures = (self._future,) if self._first is None else (self._first, self._future)
        for f in futures:
            if f.exception is not None:
                return None, translate(f.exception)
        if self._no_ack:
            return None, None
        f = futures[0]
        m = f.value
        return _new_metadata(RecordMetadata, (m.topic, m.partition, m.topic_partition, m.offset,
                                              m.timestamp, f.timestamp_type, None)), None
