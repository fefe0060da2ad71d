# cython: binding=False
"""Compiled twin of kcore/pure/future.py: one ProduceRequestResult per batch, completed once;
each record's FutureRecordMetadata is a view on it. Completion and registration take the
result's lock, a pymutex held for a few C steps (before 3.13 the GIL does); readers test
is_done with an acquire load and take no lock (thread rules: future.pxd).

Callbacks are kept flat in the result's ``_thunks``: ``[future, callback, errback, ...]``, one
entry of three per registration (an add_errback right after an add_callback on the same record
fills that entry's free slot). done() walks them in C, in registration order.

asyncio awaits register loop calls in ``_loop_calls`` (flat ``[waker, call, arg, ...]``), which
done() hands to their loops' wakers (kcore/_future.py): one wakeup per loop per Sender
pass. A batch nobody awaits pays one pointer test."""
cimport cython
from cpython.object cimport PyObject, PyTypeObject, newfunc
from libc.stdint cimport int64_t

from kcore.atomic_impl cimport kc_load_int, kc_store_int_release

import threading

from kcore.errors import KafkaTimeoutError

include "_future.py"  # the result types, Future and BatchFuture, compiled in here

cdef extern from *:
    """
    /* Whether a result takes its lock: always free-threaded, and where a cython.pymutex is a
       PyMutex (3.13+). Before 3.13 the GIL alone makes the sections it guards atomic (a few C
       steps: no Python code, no allocation) and the lock would be a slower PyThread lock. */
    #if CYTHON_COMPILING_IN_CPYTHON_FREETHREADING || PY_VERSION_HEX >= 0x030D0000
    #define KC_RESULT_LOCKS 1
    #else
    #define KC_RESULT_LOCKS 0
    #endif
    """
    const bint KC_RESULT_LOCKS


cdef inline void _lock(ProduceRequestResult r) noexcept:
    if KC_RESULT_LOCKS:
        r._lock.acquire()


cdef inline void _unlock(ProduceRequestResult r) noexcept:
    if KC_RESULT_LOCKS:
        r._lock.release()

__all__ = ["TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata",
           "Future", "BatchFuture", "BatchMetadata", "AioFutures", "AioRecordFuture"]

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

    @property
    def is_done(self):
        return self.done_c()

    def done(self, int64_t base_offset=-1, int64_t log_append_time=-1, error=None,
             record_errors=None):
        """Complete the batch: the first call wins, any later or racing one does nothing."""
        cdef list thunks, loop_calls
        if self.done_c():
            return
        _lock(self)
        try:
            if kc_load_int(&self._done):
                return
            old_error = self.error  # dropped after the lock (its decref may free it)
            old_record_errors = self.record_errors
            self.base_offset, self.log_append_time = base_offset, log_append_time
            self.error, self.record_errors = error, record_errors
            kc_store_int_release(&self._done, 1)
            thunks, self._thunks = self._thunks, None
            loop_calls, self._loop_calls = self._loop_calls, None
            event = self._event
        finally:
            _unlock(self)
        if event is not None:
            event.set()
        if loop_calls is not None:
            _post_loop_calls(loop_calls)
        if thunks:
            _run_thunks(self, thunks)

    def wait(self, timeout=None):
        if self.done_c():
            return True
        event = threading.Event()  # made before the lock (Python code)
        _lock(self)
        try:
            if kc_load_int(&self._done):
                return True
            if self._event is None:
                self._event = event
            installed = self._event
        finally:
            _unlock(self)
        return installed.wait(timeout)

    def add_thunk(self, FutureRecordMetadata future not None, callback, errback):
        """Register a call for when the batch completes; False if it already has."""
        return _register(self, False, future, callback, errback)

    def add_loop_call(self, loop, call, arg):
        """Run call(arg) on asyncio ``loop`` once done (batched with the other calls done by
        then); False (nothing registered) if done already."""
        return _register(self, True, _waker_of(loop), call, arg)


cdef bint _register(ProduceRequestResult r, bint loop_call, a, b, c) except -1:
    """Append (future, callback, errback) to r's thunks, or (waker, call, arg) to its loop
    calls; False if r is done. The list is made with r's lock let go (an allocation may run
    the GC, whose finalizers may register on r), then r is checked again under it."""
    cdef list fresh = None, calls
    cdef Py_ssize_t n
    while True:
        _lock(r)
        try:
            if kc_load_int(&r._done):
                return False
            calls = r._loop_calls if loop_call else r._thunks
            if calls is None and fresh is not None:
                calls = fresh
                if loop_call:
                    r._loop_calls = calls
                else:
                    r._thunks = calls
            if calls is not None:  # appends and item stores: no GC, no Python code
                n = len(calls)
                if not loop_call and n and calls[n - 3] is a:  # the same record: a free slot?
                    if b is None and calls[n - 1] is None:
                        calls[n - 1] = c
                        return True
                    if c is None and calls[n - 2] is None:
                        calls[n - 2] = b
                        return True
                calls.append(a)
                calls.append(b)
                calls.append(c)
                return True
        finally:
            _unlock(r)
        fresh = []


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
    if not r.done_c():
        return None
    if r.error is not None:
        return r.error
    if r.record_errors:
        return r.record_errors.get(f._index)
    return None


cdef _metadata(FutureRecordMetadata f):
    """The RecordMetadata of a record of a done batch that succeeded: the first one stored (a
    racing thread may make another; it is dropped, so a returned one is never freed)."""
    cdef ProduceRequestResult r = f._result
    cdef int64_t index = f._index
    with cython.critical_section(f):
        value = f._value
    if value is not None:
        return value
    if r.pieces is not None:
        r, index = _piece_of(r, index)
    ts = r.log_append_time if r.log_append_time != -1 else f._timestamp
    offset = r.base_offset + index if r.base_offset != -1 else -1
    tp = r.topic_partition  # a TopicPartition: index it as a tuple (its __getitem__ is slow)
    t = tp if isinstance(tp, tuple) else tuple(tp)
    args = (((<tuple>t)[0], (<tuple>t)[1], tp, offset, ts, None, f._key_size,
             f._value_size, f._header_size),)
    value = _tuple_new(_RecordMetadata, <PyObject*>args, NULL)
    with cython.critical_section(f):
        if f._value is None:
            f._value = value
        stored = f._value
    return stored


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
        return self._result.done_c()

    @property
    def exception(self):
        return _exception(self)

    @property
    def timestamp_type(self):
        return _timestamp_type(self._result, self._index)

    @property
    def value(self):
        if self._result.done_c() and _exception(self) is None:
            return _metadata(self)
        return None

    def succeeded(self):
        return self._result.done_c() and _exception(self) is None

    def failed(self):
        return self._result.done_c() and _exception(self) is not None

    def retriable(self):
        return self.failed() and getattr(self.exception, "retriable", False)

    def get(self, timeout=None):
        if not self._result.done_c() and not self._result.wait(timeout):
            raise KafkaTimeoutError("Timeout after waiting for %s secs." % (timeout,))
        exc = _exception(self)
        if exc is not None:
            raise exc
        return _metadata(self)

    # kafka-python's trio (kcore/_future.py's _Callbacks for the pure twin), with no
    # Python-level call on the way to the batch's thunks
    def add_callback(self, f, *args, **kwargs):
        return _add(self, _partial(f, args, kwargs) if args or kwargs else f, None)

    def add_errback(self, f, *args, **kwargs):
        return _add(self, None, _partial(f, args, kwargs) if args or kwargs else f)

    def add_both(self, f, *args, **kwargs):
        f = _partial(f, args, kwargs) if args or kwargs else f
        return _add(self, f, f)

    def add_loop_call(self, loop, call, arg):
        return _register(self._result, True, _waker_of(loop), call, arg)

    def __await__(self):
        return _await(self)


cdef _add(FutureRecordMetadata future, callback, errback):
    """Register for when the batch completes, or call now if it has."""
    if not _register(future._result, False, future, callback, errback):
        _notify(future, callback, errback)
    return future


cdef FutureRecordMetadata new_future(ProduceRequestResult result, int64_t index,
                                     int64_t timestamp_ms, int64_t key_size, int64_t value_size,
                                     int64_t header_size):
    cdef FutureRecordMetadata f = FutureRecordMetadata.__new__(FutureRecordMetadata)
    f._result, f._index, f._timestamp = result, index, timestamp_ms
    f._key_size, f._value_size, f._header_size = key_size, value_size, header_size
    return f


# -- asyncio: a record's asyncio future (pyprod.aio's RecordFuture; pure twin: pure/future.py) --
cdef extern from "Python.h":
    object PyContext_CopyCurrent()
    int PyContext_Enter(object context) except -1
    int PyContext_Exit(object context) except -1
    void PyObject_GC_Track(object)
    void PyObject_GC_UnTrack(object)
    int PyObject_GC_IsTracked(object)
    object PyWeakref_NewRef(object, object)
    PyObject* PyWeakref_GetObject(object) except NULL
    object PyContext_Copy(object)

cdef extern from *:
    """
    /* A Context's mapping (CPython's struct _pycontextobject: the head, ctx_prev, ctx_vars, the
       same 3.7-3.14), checked once at run time (_snapshots_work); NULL without a context. */
    typedef struct { PyObject_HEAD void *ctx_prev; PyObject *ctx_vars; } kc_context;
    static inline PyObject *kc_context_vars(PyObject *ctx) {
        return ctx == NULL ? NULL : ((kc_context *)ctx)->ctx_vars;
    }
    static inline PyObject *kc_current_context_vars(void) {
        return kc_context_vars(PyThreadState_Get()->context);
    }
    """
    PyObject* kc_context_vars(PyObject* ctx)
    PyObject* kc_current_context_vars()


cdef inline void _gc_track(obj) noexcept:
    if not PyObject_GC_IsTracked(obj):
        PyObject_GC_Track(obj)


cdef int _snapshots = -1  # kc_context_vars reads a Context's mapping: 1 yes, 0 no, -1 not known


cdef bint _snapshots_work() except -1:
    """Whether kc_context_vars reads the mapping: a ContextVar.set replaces it."""
    global _snapshots
    if _snapshots == -1:
        import contextvars
        ctx = contextvars.Context()
        before = <size_t>kc_context_vars(<PyObject*>ctx)
        ctx.run(contextvars.ContextVar("kcore").set, 1)
        after = <size_t>kc_context_vars(<PyObject*>ctx)
        _snapshots = before != 0 and after != 0 and before != after
    return _snapshots


@cython.final
cdef class _Snapshot:
    """The context when callbacks were added, never entered: each callback runs in a copy made
    as it runs (asyncio's: a copy of add_done_callback's context). One is shared while the
    context's (immutable) mapping is the same object: a gathered window keeps one Context, not
    one each that the GC scanned and promoted until its callback ran."""
    cdef object context


cdef object _callback_context(AioFutures owner):
    """The context entry of a callback added without one: a shared _Snapshot, or a copy."""
    cdef PyObject* now = kc_current_context_vars()
    cdef _Snapshot snap = owner._snapshot
    if not _snapshots_work():
        return PyContext_CopyCurrent()
    if snap is None or now == NULL or kc_context_vars(<PyObject*>snap.context) != now:
        snap = _Snapshot.__new__(_Snapshot)
        snap.context = PyContext_CopyCurrent()
        owner._snapshot = snap
    return snap


cdef inline object _entered(context):  # the Context a callback runs in
    if type(context) is _Snapshot:
        return PyContext_Copy((<_Snapshot>context).context)
    return context


cdef class AioFutures:
    """The asyncio futures of one loop's records (kcore/_future.py's asyncio section): what they
    share (the loop, its waker, the result type, the error translation) and the callbacks added
    to done futures, run soon in one loop callback per pass (no Handle per record)."""
    cdef readonly object loop
    cdef object _waker, _metadata_type, _translate
    cdef bint _no_ack
    cdef object _soon  # a weak reference to the _Soon the loop will run, or None
    cdef _Snapshot _snapshot  # the last one made (_callback_context)

    def __init__(self, loop, metadata_type, translate, no_ack=False):
        self.loop, self._waker = loop, _waker_of(loop)
        self._metadata_type, self._translate, self._no_ack = metadata_type, translate, no_ack

    def wrap(self, FutureRecordMetadata future not None, FutureRecordMetadata first=None):
        """The asyncio future of ``future`` (of a send_batch: done with its first record too,
        whose metadata it gives)."""
        cdef AioRecordFuture f = AioRecordFuture.__new__(AioRecordFuture)
        f._owner, f._future, f._first = self, future, first
        PyObject_GC_UnTrack(f)  # tracked once it can be in a cycle (AioRecordFuture's doc)
        return f

    cdef int _add_soon(self, fn, AioRecordFuture future, context) except -1:
        cdef _Soon soon = None
        if self._soon is not None:
            soon = <_Soon><object>PyWeakref_GetObject(self._soon)  # None once dropped
        if soon is None or soon.calls is None:
            soon = _Soon.__new__(_Soon)
            soon.calls = []
            self.loop.call_soon(soon)  # a closed loop raises, as asyncio's add_done_callback
            self._soon = PyWeakref_NewRef(soon, None)
        soon.calls.append(fn)
        soon.calls.append(future)
        soon.calls.append(context)
        return 0


@cython.final
cdef class _Soon:
    """Callbacks added to done futures, for one loop callback. The loop's Handle holds it, its
    AioFutures only weakly: futures (not tracked by the GC) refer to their AioFutures, so a
    strong reference would make a cycle the GC cannot see (a loop closed before running it)."""
    cdef list calls  # flat [fn, future, context, ...]; None once run
    cdef object __weakref__

    def __call__(self):
        cdef list calls = self.calls
        cdef Py_ssize_t i
        self.calls = None
        for i in range(0, len(calls), 3):
            _run_in(calls[i], <AioRecordFuture>calls[i + 1], calls[i + 2])


cdef _run_in(fn, AioRecordFuture future, context):
    """fn(future) as a Handle runs it: in context (_entered), an exception to the loop."""
    context = _entered(context)
    PyContext_Enter(context)
    try:
        fn(future)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        future._owner.loop.call_exception_handler({
            "message": "Exception in callback %r" % (fn,), "exception": exc, "future": future})
    finally:
        PyContext_Exit(context)


def _aio_wake(AioRecordFuture future):
    """On the loop (a batched loop call): the record's batch completed."""
    cdef Py_ssize_t i
    if future._cancelled:
        return
    if not future._done() and future._listen():  # a batch's first record still waits
        return
    callbacks, future._callbacks = <list>(future._callbacks or []), None
    for i in range(0, len(callbacks), 2):
        _run_in(callbacks[i], future, callbacks[i + 1])


@cython.freelist(64)
cdef class AioRecordFuture:
    """One record's (or send_batch call's) asyncio future: asyncio.isfuture is true, and await,
    gather, wait, wait_for and callbacks work as on asyncio.Future. It registers with the batch
    only when somebody waits; done() turns true when the batch completes (any thread), callbacks
    run on the loop. cancel() does not stop the record. Loop thread only (future.pxd).

    The GC tracks it only once it may be in a cycle: registered with callbacks (which may hold
    it: a gather's, a Task's), or holding an exception (whose traceback may): a window of
    futures waited on with gather made the GC scan the window over and over otherwise."""
    cdef AioFutures _owner
    cdef FutureRecordMetadata _future, _first
    cdef list _callbacks  # flat [fn, context, ...] while registered, else None
    cdef object _value, _exception
    cdef bint _settled, _cancelled
    cdef public bint _asyncio_future_blocking
    cdef object __weakref__

    def __init__(self):
        raise TypeError("made by AioFutures.wrap()")

    cdef inline bint _done(self):
        return self._cancelled or (self._future._result.done_c() and
                                   (self._first is None or self._first._result.done_c()))

    cdef bint _listen(self) except -1:
        """Have the loop run _aio_wake(self) when the batch completes; False if it has."""
        waiting = self._future
        if self._first is not None and self._future._result.done_c():
            waiting = self._first
        _gc_track(self)
        return _register((<FutureRecordMetadata>waiting)._result, True, self._owner._waker,
                         _aio_wake, self)

    cdef int _settle(self) except -1:
        """Make the outcome of a done future once (asyncio's errors otherwise)."""
        if self._cancelled:
            raise _asyncio().CancelledError()
        if self._settled:
            return 0
        if not self._done():
            raise _asyncio().InvalidStateError("Result is not ready.")
        exc = _exception(self._first) if self._first is not None else None
        if exc is None:
            exc = _exception(self._future)
        if exc is not None:
            _gc_track(self)
            self._exception = self._owner._translate(exc)
        elif not self._owner._no_ack:
            self._value = _aio_metadata(self._owner._metadata_type,
                                        self._first if self._first is not None else self._future)
        self._settled = True
        return 0

    def done(self):
        return self._done()

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
            context = _callback_context(self._owner)
        if self._callbacks is not None:  # registered: the wake runs them, in order
            self._callbacks.append(fn)
            self._callbacks.append(context)
        elif self._done() or not self._listen():
            self._owner._add_soon(fn, self, context)
        else:
            self._callbacks = [fn, context]

    def remove_done_callback(self, fn):
        cdef list callbacks = self._callbacks, kept = []
        cdef Py_ssize_t i
        if not callbacks:
            return 0
        for i in range(0, len(callbacks), 2):
            if callbacks[i] != fn:
                kept += callbacks[i:i + 2]
        removed = (len(callbacks) - len(kept)) // 2
        callbacks[:] = kept
        return removed

    def cancel(self, msg=None):
        """Mark it cancelled and schedule its callbacks (the record is not stopped)."""
        cdef list callbacks = self._callbacks
        cdef Py_ssize_t i
        if self._done():
            return False
        self._cancelled, self._callbacks = True, None
        for i in range(0, len(callbacks or ()), 2):
            self._owner.loop.call_soon(callbacks[i], self, context=_entered(callbacks[i + 1]))
        return True

    def __await__(self):
        if not self._done():
            self._asyncio_future_blocking = True
            yield self
            if not self._done():
                raise RuntimeError("await wasn't used with future")
        return self.result()

    def __iter__(self):
        return self.__await__()

    def __repr__(self):
        state = "cancelled" if self._cancelled else "finished" if self._done() else "pending"
        return "<%s %s>" % (type(self).__name__, state)


cdef _aio_metadata(type metadata_type, FutureRecordMetadata f):
    """aiokafka's RecordMetadata of a record of a done batch that succeeded (timestamp_type 1:
    the broker's LogAppendTime; log_start_offset None)."""
    cdef ProduceRequestResult r = f._result
    cdef int64_t index = f._index
    if r.pieces is not None:
        r, index = _piece_of(r, index)
    tp = r.topic_partition
    t = tp if isinstance(tp, tuple) else tuple(tp)
    args = (((<tuple>t)[0], (<tuple>t)[1], tp, r.base_offset + index if r.base_offset != -1
             else -1, r.log_append_time if r.log_append_time != -1 else f._timestamp,
             1 if r.log_append_time != -1 else 0, None),)
    value = _tuple_new(metadata_type, <PyObject*>args, NULL)
    PyObject_GC_UnTrack(value)  # strs, ints, None and the result's TopicPartition: no cycle
    return value


def _asyncio():
    import asyncio  # only a failed or early result() pays for asyncio's import
    return asyncio
