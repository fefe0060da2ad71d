"""Compiled twin of kcore/pure/selector.py (see it for the design).

Non-blocking socket calls on a ready socket take microseconds, so they run with the GIL held:
releasing it would let a caller thread's send() loop keep it for a whole switch interval (5 ms)
before the Sender got it back. Only a poll that has to wait, and a write of at least 16 KiB (the
kernel copies it and, on loopback, delivers it too: ~100 us for a 6-batch request), release it.
select_io releases it once: the poll and the attached channels' writes and reads share one
nogil section.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.object cimport PyTypeObject, newfunc
from cpython.ref cimport PyObject
from libc.stdlib cimport free, realloc

from kcore.atomic_impl cimport kc_load_int, kc_store_int
from kcore.gil_handback cimport restore_switch, short_switch

import errno
import os
import selectors
import socket

__all__ = ["Selector", "Waker", "send_buffers", "recv_into", "MAX_IOV"]

MAX_IOV = 64
cdef int _MAX_IOV = 64
cdef size_t _NOGIL_WRITE = 16384
cdef long long _HANDBACK_WAIT_US = 1000  # a poll that may sleep longer keeps the interval
# selectors.SelectorKey(...) would run the namedtuple's Python __new__ (tuple.__new__(cls, t)):
# made in C instead (modify() runs on each large write, on the Sender's loop)
cdef newfunc _tuple_new = (<PyTypeObject*>tuple).tp_new
cdef type _Key = selectors.SelectorKey


cdef object _key(fileobj, int fd, int events, data):
    args = ((fileobj, fd, events, data),)
    return _tuple_new(_Key, <PyObject*>args, NULL)

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


cdef int _fd(obj) except -1:
    fd = obj if isinstance(obj, int) else obj.fileno()
    if fd < 0:
        raise ValueError("Invalid file descriptor: %d" % fd)
    return fd


cdef kc_sock _sock_fd(sock) except? -1:
    """The socket's descriptor; OSError(EBADF) once it is closed, as socket methods raise."""
    fd = sock.fileno()
    if fd < 0:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return fd


cdef object _error(int err):
    if err == KC_EAGAIN:
        return BlockingIOError(err, os.strerror(err))
    if err == KC_EINTR:
        return InterruptedError(err, os.strerror(err))
    return OSError(err, os.strerror(err))


cdef class Selector:
    """register / unregister / modify / select / close, as selectors.DefaultSelector."""

    def __cinit__(self):
        self._keys, self._order, self._channels = {}, [], {}
        self._fds, self._chans, self._nfds, self._cap = NULL, NULL, 0, 0
        self._dirty, self._closed = True, False

    def __dealloc__(self):
        free(self._fds)
        free(self._chans)

    def register(self, fileobj, int events, data=None):
        cdef int fd = _fd(fileobj)
        if events <= 0 or events & ~(_READ | _WRITE):
            raise ValueError("Invalid events: %r" % events)
        if fd in self._keys:
            raise KeyError("%r (FD %d) is already registered" % (fileobj, fd))
        key = self._keys[fd] = _key(fileobj, fd, events, data)
        self._dirty = True
        return key

    def unregister(self, fileobj):
        key = self._keys.pop(_fd(fileobj), None)
        if key is None:
            raise KeyError("%r is not registered" % (fileobj,))
        self._channels.pop(key.fd, None)
        self._dirty = True
        return key

    def set_channel(self, fileobj, Channel channel):
        """select_io does the I/O of this registered socket's channel while it is attached
        (None: no longer); unregister() forgets it."""
        cdef int fd = _fd(fileobj)
        if fd not in self._keys:
            raise KeyError("%r is not registered" % (fileobj,))
        if channel is None:
            self._channels.pop(fd, None)
        else:
            self._channels[fd] = channel
        self._dirty = True

    def modify(self, fileobj, int events, data=None):
        cdef int fd = _fd(fileobj)
        if fd not in self._keys:
            raise KeyError("%r is not registered" % (fileobj,))
        self._keys.pop(fd)
        return self.register(fileobj, events, data)

    def precise_timers(self):
        """The calling thread's timed waits (on this Selector too) end on time: Linux's timer
        slack, 50 us added to each by default, set to 1 us (the Sender's linger). True if set
        (Linux)."""
        return kc_precise_timers() == 1

    def close(self):
        self._keys.clear()
        self._channels.clear()
        self._closed = True

    cdef int _rebuild(self) except -1:
        cdef Py_ssize_t i, n = len(self._keys)
        cdef kc_pollfd* fds
        cdef PyObject** chans
        if n > self._cap:
            fds = <kc_pollfd*>realloc(self._fds, n * sizeof(kc_pollfd))
            if fds == NULL:
                raise MemoryError()
            self._fds = fds
            chans = <PyObject**>realloc(self._chans, n * sizeof(PyObject*))
            if chans == NULL:
                raise MemoryError()
            self._chans, self._cap = chans, n
        self._order = list(self._keys.values())
        for i in range(n):
            key = self._order[i]
            channel = self._channels.get(key.fd)  # (the dict keeps it alive)
            self._chans[i] = <PyObject*>channel if channel is not None else NULL
            self._fds[i].fd = <kc_sock>key.fd
            self._fds[i].events = (KC_POLLIN if key.events & _READ else 0) | \
                (KC_POLLOUT if key.events & _WRITE else 0)
        self._nfds, self._dirty = n, False
        return 0

    def select(self, timeout=None):
        """[(key, events)] ready now, waiting up to timeout seconds (None: forever)."""
        return self._select(timeout, False)

    def select_io(self, timeout=None):
        """select(), and the I/O of every ready socket with an attached channel (set_channel):
        the poll and that I/O run in one section without the GIL."""
        return self._select(timeout, True)

    cdef list _select(self, timeout, bint io):
        cdef long long us
        cdef int rc, err
        cdef Py_ssize_t i
        cdef short rev
        cdef bint waits
        cdef double saved
        if self._closed:
            raise RuntimeError("Selector is closed")
        if timeout is None:
            us = -1
        elif timeout <= 0:
            us = 0
        else:  # to the microsecond (rounded up), at most about 24 days (as poll's int ms)
            us = <long long>min(timeout * 1e6 + 0.999, 2147483.0 * 1e6)
        if self._dirty:
            self._rebuild()
        for i in range(self._nfds):
            self._fds[i].revents = 0
        rc = kc_poll(self._fds, self._nfds, 0)  # what is ready now: no need to drop the GIL
        waits = rc == 0 and us != 0
        if waits or (io and rc > 0 and self._big_write()):
            # a section that does not sleep, or sleeps 1 ms at most: the GIL asked back soon
            saved = short_switch() if not waits or 0 <= us <= _HANDBACK_WAIT_US else 0.0
            with nogil:
                if waits:
                    rc = kc_poll_us(self._fds, self._nfds, us)
                if io and rc > 0:
                    self._io()
            restore_switch(saved)
        elif io and rc > 0:  # ready at once: microseconds of syscalls, the GIL kept (see top)
            self._io()
        if rc < 0:
            err = kc_sock_errno()
            if err == KC_EINTR:
                return []
            raise _error(err)
        ready = []
        for i in range(self._nfds):
            rev = self._fds[i].revents
            if rev:
                key = self._order[i]
                mask = (_READ if rev & (KC_POLLIN | KC_POLLERR) else 0) | \
                    (_WRITE if rev & (KC_POLLOUT | KC_POLLERR) else 0)
                mask &= key.events
                if mask:
                    ready.append((key, mask))
        return ready

    cdef void _io(self) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self._nfds):
            if self._chans[i] != NULL and self._fds[i].revents:
                (<Channel>self._chans[i]).io_c(self._fds[i].revents, self._fds[i].events)

    cdef bint _big_write(self) noexcept:
        """Will an attached channel write at least _NOGIL_WRITE bytes (worth the GIL's
        release, as in send_buffers)?"""
        cdef Py_ssize_t i
        for i in range(self._nfds):
            if self._chans[i] != NULL and self._fds[i].revents & (KC_POLLOUT | KC_POLLERR):
                if (<Channel>self._chans[i]).unwritten_c() >= <Py_ssize_t>_NOGIL_WRITE:
                    return True
        return False


cdef class Waker:
    """Interrupts a Selector's wait from any thread (Java's Selector.wakeup): a socket pair
    whose reader the Selector watches, and one byte written while a wake-up is pending."""

    def __cinit__(self):
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)
        self.buf = bytearray(1024)
        with self._lock:
            self.fd = <kc_sock>self.writer.fileno()
            kc_store_int(&self._pending, 0)

    @property
    def pending(self):
        """A byte was written and not yet drained."""
        return <bint>kc_load_int(&self._pending)

    @pending.setter
    def pending(self, bint value):
        with self._lock:
            kc_store_int(&self._pending, value)

    def wakeup(self):
        """Interrupt the Selector's wait (thread-safe); nearly free while one is pending."""
        self.wake()

    cdef int wake(self) except -1:
        cdef const char* x = b"x"
        cdef const void* byte = x
        cdef size_t one = 1
        if kc_load_int(&self._pending):
            return 0
        with self._lock:  # against close(): never a write to a descriptor given back
            if self.fd >= 0 and not kc_load_int(&self._pending):
                kc_store_int(&self._pending, 1)
                kc_send_iov(self.fd, &byte, &one, 1)  # EAGAIN: a byte is there already
        return 0

    def drain(self):
        """Read the pending bytes (the Selector's thread, once its wait returned)."""
        try:
            while recv_into(self.reader, self.buf):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        # After draining: a wakeup() between the two leaves a byte, so the next wait returns.
        with self._lock:
            kc_store_int(&self._pending, 0)

    def close(self):
        with self._lock:  # no wake() writes once this is let go
            self.fd = -1
        self.reader.close()
        self.writer.close()


def send_buffers(sock, buffers):
    """Write the bytes-like objects in order (at most MAX_IOV of them) on a non-blocking
    socket; returns the number of bytes written. BlockingIOError if none could be."""
    cdef Py_buffer views[64]
    cdef const void* ptrs[64]
    cdef size_t lens[64]
    cdef int n = 0, i
    cdef long long rc
    cdef size_t total = 0
    cdef kc_sock fd = _sock_fd(sock)
    try:
        for b in buffers:
            if n == _MAX_IOV:
                break
            PyObject_GetBuffer(b, &views[n], PyBUF_SIMPLE)
            ptrs[n], lens[n] = views[n].buf, <size_t>views[n].len
            total += lens[n]
            n += 1
        if total >= _NOGIL_WRITE:  # the kernel copies (and, on loopback, delivers) it
            with nogil:
                rc = kc_send_iov(fd, ptrs, lens, n)
        else:
            rc = kc_send_iov(fd, ptrs, lens, n) if n else 0
        if rc < 0:
            raise _error(kc_sock_errno())
        return rc
    finally:
        for i in range(n):
            PyBuffer_Release(&views[i])


def recv_into(sock, buffer):
    """Read what is available into a writable buffer; returns the count (0 = EOF)."""
    cdef Py_buffer view
    cdef long long rc
    cdef kc_sock fd = _sock_fd(sock)
    try:
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError("recv_into() needs a writable bytes-like object, not %s"
                        % type(buffer).__name__) from None
    try:
        rc = kc_recv(fd, view.buf, <size_t>view.len)
        if rc < 0:
            raise _error(kc_sock_errno())
        return rc
    finally:
        PyBuffer_Release(&view)
