"""The futures' Python part, the same in both implementations (see kcore/___init__.py):
the result types (TopicPartition, RecordMetadata, BatchMetadata), callback helpers, kafka-python's
Future for early errors, and send_batch's BatchFuture. ProduceRequestResult and
FutureRecordMetadata, the per-batch and per-record hot path, are in kcore/future.pyx and its
pure twin kcore/pure/future.py.

asyncio: every future is awaitable (``_await``) without blocking the loop. An await registers a
loop call ``(waker, call, arg)`` on what completes (``add_loop_call``); completion hands the
calls to their loop's ``_LoopWaker``, which wakes the loop with one ``call_soon_threadsafe``
for everything completed until the loop runs it: one wakeup per Sender pass, not per record.
Nothing of this runs unless somebody awaits (asyncio itself is imported by the first await)."""
import collections
import functools
import logging
import threading
import weakref

from kcore.errors import BatchDeliveryError, KafkaTimeoutError

log = logging.getLogger("kcore.future")

TopicPartition = collections.namedtuple("TopicPartition", ["topic", "partition"],
                                        module=__name__)

RecordMetadata = collections.namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "checksum",
    "serialized_key_size", "serialized_value_size", "serialized_header_size"],
    module=__name__)

# The value of a send_batch future: every record was acknowledged.
BatchMetadata = collections.namedtuple("BatchMetadata", ["topic", "record_count",
                                                         "partition_counts"], module=__name__)


def _run(f, arg):
    try:
        f(arg)
    except Exception:
        log.exception("Error in producer callback %r", f)


def _notify(future, callback, errback):
    """A completed record's callback (on success) or errback (on failure), if it has one."""
    exc = future.exception
    if exc is None:
        if callback is not None:
            _run(callback, future.value)
    elif errback is not None:
        _run(errback, exc)


def _piece_of(result, index):
    """(result, index) of a record of a split batch in the piece that sent it."""
    while result.pieces is not None:
        for first, count, piece in result.pieces:
            if index < first + count:
                result, index = piece, index - first
                break
    return result, index


def _timestamp_type(result, index):
    """aiokafka's timestamp_type of a record of a done batch: 1 if the broker set the time
    (LogAppendTime), else 0 (CreateTime); None while the batch is not done."""
    if not result.is_done:
        return None
    if result.pieces is not None:
        result, index = _piece_of(result, index)
    return 1 if result.log_append_time != -1 else 0


# -- asyncio: waking a loop from the Sender thread ---------------------------------------------
class _LoopWaker:
    """Runs calls on one asyncio loop for other threads. The first post since the loop last ran
    them schedules one call_soon_threadsafe; later posts join it until it runs."""

    def __init__(self, loop):
        try:
            self._loop = weakref.ref(loop)
        except TypeError:  # a loop type without weak references: kept alive (and not cached)
            self._loop = lambda: loop
        self._lock = threading.Lock()
        self._posted = []   # flat [waker, call, arg, ...] lists, one per completed future
        self._scheduled = False
        self.wakeups = 0    # call_soon_threadsafe calls made

    def post(self, calls):
        """Run ``call(arg)`` of each (waker, call, arg) in ``calls`` on the loop (any thread)."""
        with self._lock:
            self._posted.append(calls)
            if self._scheduled:
                return
            self._scheduled = True
            self.wakeups += 1
        loop = self._loop()
        try:
            loop.call_soon_threadsafe(self._run)
        except (AttributeError, RuntimeError):  # the loop is gone or closed: nobody waits
            with self._lock:
                self._posted, self._scheduled = [], False

    def _run(self):
        with self._lock:
            posted, self._posted, self._scheduled = self._posted, [], False
        for calls in posted:
            for i in range(0, len(calls), 3):
                try:
                    calls[i + 1](calls[i + 2])
                except Exception:
                    log.exception("Error in a loop call %r", calls[i + 1])


_wakers = weakref.WeakKeyDictionary()
_wakers_lock = threading.Lock()


_last_waker = [None]  # the last one asked for: most programs have one loop


def _waker_of(loop):
    """The one _LoopWaker of ``loop`` (called on the loop's thread)."""
    last = _last_waker[0]
    if last is not None and last._loop() is loop:
        return last
    try:
        with _wakers_lock:
            waker = _wakers.get(loop)
            if waker is None:
                waker = _wakers[loop] = _LoopWaker(loop)
        _last_waker[0] = waker
        return waker
    except TypeError:
        return _LoopWaker(loop)


def _post_loop_calls(calls):
    """Hand flat [waker, call, arg, ...] to their wakers: one post per loop."""
    wakers = calls[::3]
    if wakers.count(wakers[0]) == len(wakers):  # one loop (the usual case): no per-call work
        wakers[0].post(calls)
        return
    mine = {}
    for i in range(0, len(calls), 3):
        mine.setdefault(calls[i], []).extend(calls[i:i + 3])
    for waker, own in mine.items():
        waker.post(own)


def _post_one(waker, call, arg, _outcome):
    waker.post([waker, call, arg])


def _loop_poster(loop, call, arg):
    """A callback/errback that posts call(arg) to loop (for futures with callback lists)."""
    return functools.partial(_post_one, _waker_of(loop), call, arg)


def _wake(waiter):
    if not waiter.done():  # not cancelled
        waiter.set_result(None)


def _await(future):
    """The body of every future's __await__: wait on the running loop, then its get()."""
    if not future.is_done:
        import asyncio  # only an await pays for asyncio's import
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        if future.add_loop_call(loop, _wake, waiter):
            yield from waiter
    return future.get()


def _partial(f, args, kwargs):
    return functools.partial(f, *args, **kwargs) if args or kwargs else f


class _Outcome:
    """kafka-python's succeeded / failed / retriable over is_done and exception."""
    __slots__ = ()

    def succeeded(self):
        return self.is_done and self.exception is None

    def failed(self):
        return self.is_done and self.exception is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def __await__(self):
        return _await(self)

    def add_loop_call(self, loop, call, arg):
        """Run call(arg) on asyncio ``loop`` once done; False (nothing registered) if done.
        For the futures with a ``_lock`` and ``_on_outcome(post)`` (their callback lists)."""
        post = _loop_poster(loop, call, arg)
        with self._lock:
            if self.is_done:
                return False
            self._on_outcome(post)
            return True


class _Callbacks(_Outcome):
    """kafka-python's add_callback / add_errback / add_both over a class's _add(cb, eb)."""
    __slots__ = ()

    def add_callback(self, f, *args, **kwargs):
        return self._add(_partial(f, args, kwargs), None)

    def add_errback(self, f, *args, **kwargs):
        return self._add(None, _partial(f, args, kwargs))

    def add_both(self, f, *args, **kwargs):
        f = _partial(f, args, kwargs)
        return self._add(f, f)


class Future(_Outcome):
    """kafka-python's kafka.future.Future: a result known without a batch (an early error)."""

    def __init__(self):
        self.is_done, self.value, self.exception = False, None, None
        self._callbacks, self._errbacks = [], []
        self._lock = threading.Lock()  # completion against registration (any threads)

    def _complete(self, value, exception):
        with self._lock:
            self.value, self.exception, self.is_done = value, exception, True
            calls = self._callbacks if exception is None else self._errbacks
            self._callbacks = self._errbacks = None
        for f in calls:
            _run(f, value if exception is None else exception)
        return self

    def success(self, value):
        return self._complete(value, None)

    def failure(self, e):
        return self._complete(None, e() if isinstance(e, type) else e)

    def _add(self, callback, errback):
        with self._lock:
            if not self.is_done:
                if callback is not None:
                    self._callbacks.append(callback)
                if errback is not None:
                    self._errbacks.append(errback)
                return True
        if self.exception is None:
            if callback is not None:
                _run(callback, self.value)
        elif errback is not None:
            _run(errback, self.exception)
        return False

    def add_callback(self, f, *args, **kwargs):
        self._add(_partial(f, args, kwargs), None)
        return self

    def add_errback(self, f, *args, **kwargs):
        self._add(None, _partial(f, args, kwargs))
        return self

    def add_both(self, f, *args, **kwargs):
        f = _partial(f, args, kwargs)
        self._add(f, f)
        return self

    def _on_outcome(self, post):
        self._callbacks.append(post)
        self._errbacks.append(post)

    def get(self, timeout=None):
        if not self.is_done:
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        if self.exception is not None:
            raise self.exception
        return self.value


class BatchFuture(_Callbacks):
    """The one future of a send_batch call: done when every record of the call completed.

    Records are reported per batch (``range_done``: the call's records ``rank .. rank+count``
    of one partition, in call order) or per record (``record_done``); records refused before
    they were appended with ``fail_now``. ``seal`` says no more records will be added. On
    failure the failed rank ranges become record indices through ``locate``, a callable
    ``(ranges) -> [(index, exception)]`` given by whoever knows each record's partition.
    """

    def __init__(self, topic, record_count, locate=None):
        self.topic = topic
        self.record_count = record_count
        self.is_done = False
        self.value = None
        self.exception = None
        self._locate = locate
        self._lock = threading.Lock()
        self._event = None
        self._pending = 0       # records appended and not completed yet
        self._sealed = False
        self._ok = collections.Counter()   # partition -> records acknowledged
        self._failures = []     # [(index, exception)] known by index
        self._failed_ranges = []  # [(partition, rank, count, error, {rank: exception})]
        self._callbacks = []    # [(callback, errback)]

    # -- reporting (caller thread and Sender thread) ----------------------------------------
    def add_pending(self, count):
        with self._lock:
            self._pending += count

    def fail_now(self, index, exc):
        with self._lock:
            self._failures.append((index, exc))

    def record_done(self, index, partition, exc=None):
        with self._lock:
            if exc is None:
                self._ok[partition] += 1
            else:
                self._failures.append((index, exc))
            self._pending -= 1
            finished = self._sealed and self._pending == 0
        if finished:
            self._finish()

    def range_done(self, partition, rank, count, error=None, record_errors=None):
        """count records of the call in one batch of `partition`, from the call's rank-th record
        of that partition; record_errors: {rank: exception} (used when error is None)."""
        with self._lock:
            if error is None and not record_errors:
                self._ok[partition] += count
            else:
                if error is None:  # only some records failed: the others succeeded
                    self._ok[partition] += count - len(record_errors)
                self._failed_ranges.append((partition, rank, count, error, record_errors))
            self._pending -= count
            finished = self._sealed and self._pending == 0
        if finished:
            self._finish()

    def seal(self):
        with self._lock:
            self._sealed = True
            finished = self._pending == 0
        if finished:
            self._finish()

    def _finish(self):
        failures = self._failures
        if self._failed_ranges:
            failures = failures + self._locate(self._failed_ranges)
            self._failed_ranges = None
        if failures:
            failures.sort(key=lambda f: f[0])
            ok = self.record_count - len(failures)
            self.exception = BatchDeliveryError(failures, ok)
        else:
            self.value = BatchMetadata(self.topic, self.record_count,
                                       dict(sorted(self._ok.items())))
        with self._lock:
            self.is_done = True
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        if event is not None:
            event.set()
        for callback, errback in callbacks:
            self._call(callback, errback)

    # -- kafka-python's future API ----------------------------------------------------------
    def retriable(self):
        return False  # what could be retried, was

    def get(self, timeout=None):
        if not self.is_done:
            with self._lock:
                if self._event is None and not self.is_done:
                    self._event = threading.Event()
                event = self._event
            if event is not None and not event.wait(timeout):
                raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        if self.exception is not None:
            raise self.exception
        return self.value

    def _call(self, callback, errback):
        if self.exception is None:
            if callback is not None:
                _run(callback, self.value)
        elif errback is not None:
            _run(errback, self.exception)

    def _add(self, callback, errback):
        with self._lock:
            if not self.is_done:
                self._callbacks.append((callback, errback))
                return self
        self._call(callback, errback)
        return self

    def _on_outcome(self, post):
        self._callbacks.append((post, post))

    def __repr__(self):
        return "<BatchFuture %s records=%d done=%s>" % (self.topic, self.record_count,
                                                        self.is_done)
