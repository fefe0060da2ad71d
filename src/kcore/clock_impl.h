/* Wall and monotonic milliseconds, and a fork counter bumped in the child (a C fork hook, as
   uvloop does): objects made before a fork can tell cheaply that they are in a child. */
#ifndef KCORE_CLOCK_IMPL_H
#define KCORE_CLOCK_IMPL_H
#include <stdint.h>

#ifdef _WIN32
#include <windows.h>
static int64_t kc_wall_ms(void) {
    FILETIME ft;
    ULARGE_INTEGER t;
    GetSystemTimePreciseAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    return (int64_t)((t.QuadPart - 116444736000000000ULL) / 10000ULL);
}
static void kc_install_fork_hook(void) {}
static int kc_fork_generation(void) { return 0; }
#else
#include <pthread.h>
#include <time.h>
static int64_t kc_wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}
/* kc_forks: written only in a forked child, before any other thread exists there. */
static volatile int kc_forks = 0;
static void kc_after_fork_in_child(void) { kc_forks++; }
static pthread_once_t kc_fork_hook_once = PTHREAD_ONCE_INIT;
static void kc_register_fork_hook(void) { pthread_atfork(NULL, NULL, kc_after_fork_in_child); }
/* Once per module that includes this (any thread: pthread_once makes it once-only). */
static void kc_install_fork_hook(void) { pthread_once(&kc_fork_hook_once, kc_register_fork_hook); }
static int kc_fork_generation(void) { return kc_forks; }
#endif
#endif
