# Socket readiness for the NetworkClient (Java's Selector role); see selector_impl.h.
from cpython.ref cimport PyObject

from kcore.channel cimport Channel
from kcore.selector_impl cimport *


cdef class Selector:
    cdef dict _keys
    cdef list _order
    cdef dict _channels             # fd -> Channel whose I/O select_io does
    cdef kc_pollfd* _fds
    cdef PyObject** _chans          # per polled fd: its Channel (borrowed), or NULL
    cdef Py_ssize_t _nfds, _cap
    cdef bint _dirty, _closed
    cdef int _rebuild(self) except -1
    cdef list _select(self, timeout, bint io)
    cdef void _io(self) noexcept nogil
    cdef bint _big_write(self) noexcept
