# cython: binding=False
"""Compiled twin of kcore/pure/channel.py (see it for the design). The queued buffers are held
as Py_buffer views and the frame being read is C state, so the writes, the reads and the
framing need no Python objects but the frames they make."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memmove, memset

from kcore.gil_handback cimport restore_switch, short_switch
from kcore.selector_impl cimport (KC_EAGAIN, KC_EINTR, KC_POLLERR, KC_POLLIN, KC_POLLOUT,
                                 kc_recv, kc_send_iov, kc_sock, kc_sock_errno)

import errno
import os

from kcore.errors import InvalidReceiveError

__all__ = ["Channel", "RECV_CHUNK", "INBOX"]

RECV_CHUNK = 65536
INBOX = 262144   # bytes select_io reads per socket and poll, at most
cdef Py_ssize_t _RECV_CHUNK = 65536
cdef Py_ssize_t _INBOX = 262144
cdef int _MAX_IOV = 64
cdef Py_ssize_t _NOGIL_WRITE = 16384   # as kcore.selector.send_buffers
cdef int _PyBUF_READ = 0x100


cdef kc_sock _fd(sock) except? -1:
    fd = sock.fileno()
    if fd < 0:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    return fd


cdef class Channel:
    def __cinit__(self, *args, **kwargs):
        self.fd = -1

    def __init__(self, max_frame, peer):
        self.max_frame = max_frame
        self.peer = peer

    def __dealloc__(self):
        self._release_all()
        free(self.pieces)
        free(self.rbuf)
        free(self.inbox)

    cdef void _release_all(self) noexcept:
        cdef Piece* p
        while self.count:
            p = &self.pieces[self.head]
            PyBuffer_Release(&p.view)
            if p.tag != NULL:
                Py_DECREF(<object>p.tag)
            self.head += 1
            self.count -= 1
        self.head = 0

    # -- sending --
    def enqueue(self, tag, buffers):
        """Queue a whole frame; tag comes back from write()/advance() once it is written."""
        cdef Py_ssize_t start = self.count, n = len(buffers), i
        try:
            for i in range(n):
                self._push(buffers[i], i == n - 1, tag)
            if n == 0:
                self._push(None, True, tag)
        except BaseException:
            while self.count > start:  # the frame goes whole or not at all
                self.count -= 1
                PyBuffer_Release(&self.pieces[self.head + self.count].view)
                if self.pieces[self.head + self.count].tag != NULL:
                    Py_DECREF(<object>self.pieces[self.head + self.count].tag)
            raise

    cdef int _push(self, object b, bint last, object tag) except -1:
        cdef Piece* grown
        cdef Py_ssize_t cap
        if self.head + self.count == self.cap:
            if self.head:  # written pieces leave room at the front
                memmove(self.pieces, self.pieces + self.head, self.count * sizeof(Piece))
                self.head = 0
            else:
                cap = self.cap * 2 if self.cap else 16
                grown = <Piece*>realloc(self.pieces, cap * sizeof(Piece))
                if grown == NULL:
                    raise MemoryError()
                self.pieces, self.cap = grown, cap
        cdef Piece* p = &self.pieces[self.head + self.count]
        memset(p, 0, sizeof(Piece))  # an empty view (obj NULL) for a frame with no buffers
        if b is not None:
            PyObject_GetBuffer(b, &p.view, PyBUF_SIMPLE)
        if last:
            Py_INCREF(tag)
            p.tag = <PyObject*>tag
        self.count += 1
        return 0

    @property
    def wants_write(self):
        return self.count > 0

    def pending(self, int max_iov=_MAX_IOV):
        """The unwritten buffers, oldest first (at most max_iov); valid until advance()."""
        cdef list iov = []
        cdef Py_ssize_t i
        cdef Piece* p
        for i in range(self.head, self.head + self.count):
            if len(iov) >= max_iov:
                break
            p = &self.pieces[i]
            if p.view.len > p.off:
                iov.append(PyMemoryView_FromMemory(<char*>p.view.buf + p.off,
                                                   p.view.len - p.off, _PyBUF_READ))
        return iov

    def advance(self, Py_ssize_t written):
        """written bytes of pending() went out: the tags of the frames now fully written."""
        cdef list done = []
        self._advance(written, done)
        return done

    cdef int _advance(self, Py_ssize_t written, list done) except -1:
        cdef Piece* p
        cdef Py_ssize_t left
        while self.count:
            p = &self.pieces[self.head]
            left = p.view.len - p.off
            if written < left:
                p.off += written
                return 0
            written -= left
            PyBuffer_Release(&p.view)
            self.head += 1
            self.count -= 1
            if p.tag != NULL:
                tag = <object>p.tag
                Py_DECREF(tag)  # the list keeps it
                p.tag = NULL
                done.append(tag)
        self.head = 0
        return 0

    def write(self, sock):
        """Write what a plaintext socket takes; the tags of the frames now fully written.
        OSError other than would-block is raised."""
        cdef const void* ptrs[64]
        cdef size_t lens[64]
        cdef int n, err
        cdef Py_ssize_t total
        cdef long long rc
        cdef kc_sock fd = _fd(sock)
        cdef list done = []
        cdef double saved
        self._advance(0, done)  # pieces select_io wrote
        while self.count:
            n = self._gather(ptrs, lens, &total)
            if total == 0:
                rc = 0
            elif total >= _NOGIL_WRITE:  # the kernel copies (and, on loopback, delivers) it
                saved = short_switch()
                with nogil:
                    rc = kc_send_iov(fd, ptrs, lens, n)
                restore_switch(saved)
            else:
                rc = kc_send_iov(fd, ptrs, lens, n)
            if rc < 0:
                err = kc_sock_errno()
                if err == KC_EAGAIN or err == KC_EINTR:
                    break
                raise OSError(err, os.strerror(err))
            self._advance(<Py_ssize_t>rc, done)
            if rc < total:
                break
        return done

    cdef int _gather(self, const void** ptrs, size_t* lens, Py_ssize_t* total) noexcept nogil:
        """The unwritten bytes as an iovec (at most _MAX_IOV entries): their count."""
        cdef int n = 0
        cdef Py_ssize_t i
        cdef Piece* p
        total[0] = 0
        for i in range(self.head, self.head + self.count):
            if n == _MAX_IOV:
                break
            p = &self.pieces[i]
            if p.view.len > p.off:
                ptrs[n], lens[n] = <char*>p.view.buf + p.off, <size_t>(p.view.len - p.off)
                total[0] += p.view.len - p.off
                n += 1
        return n

    # -- receiving --
    def read(self, sock, list frames not None, int max_reads=32):
        """Read a plaintext socket until it would block (at most max_reads reads), adding the
        complete frames (without size prefix) to frames. Returns (bytes read, eof)."""
        cdef long long rc
        cdef Py_ssize_t total = 0
        cdef int i, err
        cdef kc_sock fd = _fd(sock)
        if self.rbuf == NULL:
            self.rbuf = <uint8_t*>malloc(_RECV_CHUNK)
            if self.rbuf == NULL:
                raise MemoryError()
        for i in range(max_reads):
            rc = kc_recv(fd, self.rbuf, _RECV_CHUNK)
            if rc < 0:
                err = kc_sock_errno()
                if err == KC_EAGAIN or err == KC_EINTR:
                    break
                raise OSError(err, os.strerror(err))
            if rc == 0:
                return total, True
            total += rc
            self._feed(self.rbuf, <Py_ssize_t>rc, frames)
            if rc < _RECV_CHUNK:
                break
        return total, False

    def feed(self, view, Py_ssize_t n, list frames not None):
        """The first n bytes of view arrived: add the frames they complete to frames."""
        cdef Py_buffer buf
        PyObject_GetBuffer(view, &buf, PyBUF_SIMPLE)
        try:
            if not 0 <= n <= buf.len:
                raise ValueError("n out of range: %d of %d bytes" % (n, buf.len))
            self._feed(<const uint8_t*>buf.buf, n, frames)
        finally:
            PyBuffer_Release(&buf)

    cdef int _feed(self, const uint8_t* data, Py_ssize_t n, list frames) except -1:
        cdef Py_ssize_t pos = 0, take, have
        cdef int32_t size
        while pos < n:
            if self.frame is None:
                take = min(4 - self.size_got, n - pos)
                memcpy(self.size_buf + self.size_got, data + pos, take)
                self.size_got += take
                pos += take
                if self.size_got < 4:
                    return 0
                self.size_got = 0
                size = <int32_t>((<uint32_t>self.size_buf[0] << 24) |
                                 (<uint32_t>self.size_buf[1] << 16) |
                                 (<uint32_t>self.size_buf[2] << 8) | self.size_buf[3])
                if size < 4 or size > self.max_frame:
                    raise InvalidReceiveError(
                        "%s sent a frame of %d bytes (valid: 4..%d, receive_message_max_bytes); "
                        "closing the connection" % (self.peer, size, self.max_frame))
                if n - pos >= size:  # whole frame in this chunk: one copy
                    frames.append(PyBytes_FromStringAndSize(<const char*>data + pos, size))
                    pos += size
                    continue
                self.frame = bytearray()  # grows as bytes arrive, never preallocated
                self.frame_size = size
            have = PyByteArray_GET_SIZE(self.frame)
            take = min(self.frame_size - have, n - pos)
            PyByteArray_Resize(self.frame, have + take)
            memcpy(PyByteArray_AS_STRING(self.frame) + have, data + pos, take)
            pos += take
            if have + take == self.frame_size:
                frames.append(self.frame)
                self.frame = None
        return 0

    def clear(self):
        """Drop what is unwritten and the frame being read (the connection closed); detach."""
        self._release_all()
        self.frame = None
        self.size_got = 0
        self.detach()

    # -- direct I/O (Selector.select_io) --
    def attach(self, sock):
        """From now on Selector.select_io writes and reads this plaintext socket itself."""
        self.fd = _fd(sock)
        if self.inbox == NULL:
            self.inbox = <uint8_t*>malloc(_INBOX)
            if self.inbox == NULL:
                self.fd = -1
                raise MemoryError()

    def detach(self):
        self.fd = -1
        self.inbox_len, self.eof, self.write_errno, self.read_errno = 0, False, 0, 0

    @property
    def direct(self):
        return self.fd >= 0

    def io(self, bint readable, bint writable):
        """What select_io does for a ready socket (tests; select_io calls io_c directly)."""
        if self.fd >= 0:
            with nogil:
                self.io_c((KC_POLLIN if readable else 0) | (KC_POLLOUT if writable else 0),
                          KC_POLLIN | KC_POLLOUT)

    cdef void io_c(self, short revents, short interest) noexcept nogil:
        cdef const void* ptrs[64]
        cdef size_t lens[64]
        cdef int n
        cdef Py_ssize_t total
        cdef long long rc
        if self.fd < 0 or self.write_errno or self.read_errno or self.eof:
            return
        while revents & (KC_POLLOUT | KC_POLLERR) and interest & KC_POLLOUT:
            n = self._gather(ptrs, lens, &total)
            if total == 0:
                break
            rc = kc_send_iov(self.fd, ptrs, lens, n)
            if rc < 0:
                if kc_sock_errno() != KC_EAGAIN and kc_sock_errno() != KC_EINTR:
                    self.write_errno = kc_sock_errno()
                break
            self._advance_offsets(<Py_ssize_t>rc)
            if rc < total:
                break
        while revents & (KC_POLLIN | KC_POLLERR) and self.inbox_len < _INBOX:
            rc = kc_recv(self.fd, self.inbox + self.inbox_len, _INBOX - self.inbox_len)
            if rc < 0:
                if kc_sock_errno() != KC_EAGAIN and kc_sock_errno() != KC_EINTR:
                    self.read_errno = kc_sock_errno()
                break
            if rc == 0:
                self.eof = True
                break
            self.inbox_len += rc

    cdef Py_ssize_t unwritten_c(self) noexcept nogil:
        cdef const void* ptrs[64]
        cdef size_t lens[64]
        cdef Py_ssize_t total
        if self.fd < 0:
            return 0
        self._gather(ptrs, lens, &total)
        return total

    cdef void _advance_offsets(self, Py_ssize_t written) noexcept nogil:
        cdef Py_ssize_t i, left
        cdef Piece* p
        for i in range(self.head, self.head + self.count):
            if not written:
                return
            p = &self.pieces[i]
            left = p.view.len - p.off
            if written < left:
                p.off += written
                return
            p.off += left
            written -= left

    def take_written(self):
        """(tags of the frames select_io finished writing, errno of a failed write or 0)."""
        cdef list done = []
        self._advance(0, done)
        err, self.write_errno = self.write_errno, 0
        return done, err

    def take_received(self, list frames not None):
        """What select_io read: its complete frames added to frames; (bytes, eof, errno of a
        failed read or 0). A bad frame size raises InvalidReceiveError."""
        cdef Py_ssize_t got = self.inbox_len
        self.inbox_len = 0
        eof, err = self.eof, self.read_errno
        self.eof, self.read_errno = False, 0
        if got:
            self._feed(self.inbox, got, frames)
        return got, eof, err
