# The socket calls of selector_impl.h (poll/writev/recv, or their Winsock forms), for the kcore
# modules that do socket I/O (selector, channel).
# Threads: no shared state; all are callable without the GIL, from any thread. kc_sock_errno()
# reads the calling thread's errno (WSAGetLastError): read it on the thread of the failed call,
# before any other socket call.
cdef extern from "selector_impl.h" nogil:
    ctypedef long kc_sock
    ctypedef struct kc_pollfd:
        kc_sock fd
        short events
        short revents
    int KC_POLLIN, KC_POLLOUT, KC_POLLERR, KC_EAGAIN, KC_EINTR
    int kc_poll(kc_pollfd* fds, size_t n, int timeout_ms)
    int kc_poll_us(kc_pollfd* fds, size_t n, long long timeout_us)  # < 0: forever
    int kc_sock_errno()
    int kc_precise_timers()  # the calling thread's timer slack to 1 us (Linux): 1 if set
    long long kc_send_iov(kc_sock s, const void** bufs, const size_t* lens, int n)
    long long kc_recv(kc_sock s, void* buf, size_t length)
