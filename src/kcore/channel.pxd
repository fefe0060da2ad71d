# Channel (see channel.pyx): a connection's send queue and receive framing, in C.
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t


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

    cdef void _release_all(self) noexcept
    cdef int _push(self, object b, bint last, object tag) except -1
    cdef int _advance(self, Py_ssize_t written, list done) except -1
    cdef int _feed(self, const uint8_t* data, Py_ssize_t n, list frames) except -1
