# Socket readiness for the NetworkClient (Java's Selector role); see selector_impl.h.
cdef extern from "selector_impl.h" nogil:
    ctypedef long kc_sock
    ctypedef struct kc_pollfd:
        kc_sock fd
        short events
        short revents
    int KC_POLLIN, KC_POLLOUT, KC_POLLERR, KC_EAGAIN, KC_EINTR
    int kc_poll(kc_pollfd* fds, size_t n, int timeout_ms)
    int kc_sock_errno()
    long long kc_send_iov(kc_sock s, const void** bufs, const size_t* lens, int n)
    long long kc_recv(kc_sock s, void* buf, size_t length)


cdef class Selector:
    cdef dict _keys
    cdef list _order
    cdef kc_pollfd* _fds
    cdef Py_ssize_t _nfds, _cap
    cdef bint _dirty, _closed
    cdef int _rebuild(self) except -1
