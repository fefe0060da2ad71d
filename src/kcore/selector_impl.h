/* Socket readiness and non-blocking socket I/O for kcore/selector.pyx: poll(2)/writev(2)/recv(2)
 * on POSIX, WSAPoll/WSASend/recv on Windows. Every call returns -1 with kc_sock_errno() set. */
#ifndef KCORE_SELECTOR_IMPL_H
#define KCORE_SELECTOR_IMPL_H

#include <stddef.h>

#ifdef _WIN32
#include <winsock2.h>
typedef WSAPOLLFD kc_pollfd;
typedef SOCKET kc_sock;
#define KC_POLLIN POLLRDNORM
#define KC_POLLOUT POLLWRNORM
#define KC_POLLERR (POLLERR | POLLHUP | POLLNVAL)
#define KC_EAGAIN WSAEWOULDBLOCK
#define KC_EINTR WSAEINTR
static int kc_poll(kc_pollfd *fds, size_t n, int timeout_ms) {
    return WSAPoll(fds, (ULONG)n, timeout_ms);
}
/* timeout_us < 0: forever; WSAPoll counts whole ms (rounded up) */
static int kc_poll_us(kc_pollfd *fds, size_t n, long long timeout_us) {
    return WSAPoll(fds, (ULONG)n, timeout_us < 0 ? -1 : (int)((timeout_us + 999) / 1000));
}
static int kc_precise_timers(void) { return 0; }  /* no timer slack to set */
static int kc_sock_errno(void) { return WSAGetLastError(); }
static long long kc_send_iov(kc_sock s, const void **bufs, const size_t *lens, int n) {
    WSABUF iov[64];
    DWORD sent = 0;
    int i;
    if (n > 64) n = 64;
    for (i = 0; i < n; i++) { iov[i].buf = (char *)bufs[i]; iov[i].len = (ULONG)lens[i]; }
    if (WSASend(s, iov, (DWORD)n, &sent, 0, NULL, NULL) != 0) return -1;
    return (long long)sent;
}
static long long kc_recv(kc_sock s, void *buf, size_t len) {
    if (len > 0x7fffffff) len = 0x7fffffff;
    return (long long)recv(s, (char *)buf, (int)len, 0);
}
#else
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/uio.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
typedef struct pollfd kc_pollfd;
typedef int kc_sock;
#define KC_POLLIN POLLIN
#define KC_POLLOUT POLLOUT
#define KC_POLLERR (POLLERR | POLLHUP | POLLNVAL)
#define KC_EAGAIN EAGAIN
#define KC_EINTR EINTR
static int kc_poll(kc_pollfd *fds, size_t n, int timeout_ms) {
    return poll(fds, (nfds_t)n, timeout_ms);
}
/* timeout_us < 0: forever. ppoll (Linux) waits to the microsecond (the Sender's linger);
   elsewhere poll counts whole ms, rounded up. */
static int kc_poll_us(kc_pollfd *fds, size_t n, long long timeout_us) {
#ifdef __linux__
    struct timespec t;
    if (timeout_us < 0) return ppoll(fds, (nfds_t)n, NULL, NULL);
    t.tv_sec = (time_t)(timeout_us / 1000000);
    t.tv_nsec = (long)(timeout_us % 1000000) * 1000;
    return ppoll(fds, (nfds_t)n, &t, NULL);
#else
    return poll(fds, (nfds_t)n, timeout_us < 0 ? -1 : (int)((timeout_us + 999) / 1000));
#endif
}
/* The calling thread's timed waits end on time: Linux adds its timer slack (50 us by default)
   to each, set here to 1 us (the Sender's linger). 1 if set, 0 where there is none. */
static int kc_precise_timers(void) {
#ifdef __linux__
    return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
#else
    return 0;
#endif
}
static int kc_sock_errno(void) { return errno == EWOULDBLOCK ? EAGAIN : errno; }
static long long kc_send_iov(kc_sock s, const void **bufs, const size_t *lens, int n) {
    struct iovec iov[64];
    int i;
    if (n > 64) n = 64;
    for (i = 0; i < n; i++) { iov[i].iov_base = (void *)bufs[i]; iov[i].iov_len = lens[i]; }
    return (long long)writev(s, iov, n);  /* Python ignores SIGPIPE: EPIPE comes back as errno */
}
static long long kc_recv(kc_sock s, void *buf, size_t len) {
    return (long long)recv(s, buf, len, 0);
}
#endif

#endif
