# Channel (see channel.pyx): a connection's send queue and receive framing, in C.
#
# Threads (the one place these rules are written). A Channel belongs to the thread of its
# connection's NetworkClient (the Sender thread); no lock: every field is read and written by
# that thread only. Without the GIL (on that thread: Selector.select_io's section, io(), and
# write()'s large writev) only C state is used: fd, pieces[head:head + count] (view.buf and
# view.len read, off written), inbox, inbox_len, eof, write_errno, read_errno; never a tag, the
# frame or another Python object. The bytes written without the GIL stay valid because each
# piece holds its Py_buffer until _advance or _release_all (GIL, same thread) lets it go; those,
# _push (it may move pieces) and detach/clear never run during such a section (same thread).
# nogil: io_c (attached: fd >= 0), unwritten_c, _gather, _advance_offsets: the owner thread only.
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t

from kcore.selector_impl cimport kc_sock


# One buffer of a queued frame, held (Py_buffer) until written.
ctypedef struct Piece:
    Py_buffer view
    Py_ssize_t off               # bytes of it written
    PyObject* tag                # on a frame's last piece, its tag (a reference); else NULL


cdef class Channel:
    cdef readonly Py_ssize_t max_frame
    cdef readonly object peer
    cdef Piece* pieces           # pieces[head:head + count] wait to be written
    cdef Py_ssize_t head, count, cap
    cdef uint8_t* rbuf           # RECV_CHUNK bytes, made on the first read
    cdef uint8_t size_buf[4]
    cdef int size_got
    cdef object frame            # bytearray of the frame being read, or None
    cdef Py_ssize_t frame_size
    # Direct I/O (Selector.select_io, without the GIL): the plaintext socket, the bytes read
    # and not framed yet, and the errors met, all taken with the GIL by take_*().
    cdef kc_sock fd              # -1: not attached
    cdef uint8_t* inbox
    cdef Py_ssize_t inbox_len
    cdef bint eof
    cdef int write_errno, read_errno

    cdef void _release_all(self) noexcept
    cdef int _push(self, object b, bint last, object tag) except -1
    cdef int _advance(self, Py_ssize_t written, list done) except -1
    cdef int _feed(self, const uint8_t* data, Py_ssize_t n, list frames) except -1
    # The I/O poll() found the attached socket ready for (revents), without the GIL: writes
    # advance the pieces' offsets (take_written releases them), reads fill the inbox.
    cdef void io_c(self, short revents, short interest) noexcept nogil
    cdef Py_ssize_t unwritten_c(self) noexcept nogil   # bytes in the next writev, at most
    cdef void _advance_offsets(self, Py_ssize_t written) noexcept nogil
    cdef int _gather(self, const void** ptrs, size_t* lens, Py_ssize_t* total) noexcept nogil
