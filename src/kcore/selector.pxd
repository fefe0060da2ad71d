# Socket readiness for the NetworkClient (Java's Selector role); see selector_impl.h.
#
# Threads (the one place these rules are written). A Selector belongs to one thread, the
# NetworkClient's (the Sender thread); no lock. Every field is read and written by that thread
# only, with the GIL, except in _select's one GIL-free section (the waiting kc_poll, then _io),
# which, on that same thread, reads _nfds, _fds[:_nfds] (writing their revents) and
# _chans[:_nfds] without the GIL. _chans borrows each Channel from _channels; both change only
# with the GIL on the owner thread (register, unregister, set_channel and modify set _dirty, and
# _select rebuilds before it polls; close stops _select), so no Channel in _chans goes away
# during the section.
# nogil: _io: the owner thread, inside _select's section only (after _rebuild).
# Waker: wake() and wakeup() from any thread; drain() and close() on the Selector's thread only.
# _lock (a PyMutex, a leaf: nothing else is taken under it) guards `fd` (-1 once close() ran)
# and every write of `_pending`: wake()'s test-and-write (so no byte goes to a descriptor
# close() gave back and the system reused), drain()'s clear, close()'s `fd = -1` before the
# sockets close. Its sections are pure C (a write(2) at most) and never let a thread state go,
# so a fork (the GIL, or a stopped world, held) never finds it held. `_pending` is read
# without it (kc_load_int): wake()'s fast path and the property; a stale value costs one byte
# more, or none while a byte is pending.
# send_buffers and recv_into (module functions) keep no state: any thread (wakeup() writes
# through send_buffers from caller threads, on its own socket).
cimport cython
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


cdef class Waker:
    cdef readonly object reader, writer   # the socket pair; the Selector watches reader
    cdef object buf
    cdef kc_sock fd                       # writer's descriptor, -1 once closed (_lock)
    cdef int _pending                     # a byte was written and not yet drained (atomic)
    cdef cython.pymutex _lock
    cdef int wake(self) except -1
