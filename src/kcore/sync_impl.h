/* Minimal portable mutex / condition variable / monotonic clock for kcore (nogil code).
 * POSIX: pthreads (monotonic condvar clock where available; macOS uses a relative wait).
 * Windows: SRWLOCK + CONDITION_VARIABLE. All waits may wake spuriously: callers loop. */
#ifndef KCORE_SYNC_IMPL_H
#define KCORE_SYNC_IMPL_H

#include <stdint.h>

#if defined(_MSC_VER)
#define KC_INLINE static __inline
#else
#define KC_INLINE static inline
#endif

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

typedef SRWLOCK kc_mutex_t;
typedef CONDITION_VARIABLE kc_cond_t;

KC_INLINE int kc_mutex_init(kc_mutex_t *m) { InitializeSRWLock(m); return 0; }
KC_INLINE void kc_mutex_destroy(kc_mutex_t *m) { (void)m; }
KC_INLINE void kc_mutex_lock(kc_mutex_t *m) { AcquireSRWLockExclusive(m); }
KC_INLINE void kc_mutex_unlock(kc_mutex_t *m) { ReleaseSRWLockExclusive(m); }
KC_INLINE int kc_cond_init(kc_cond_t *c) { InitializeConditionVariable(c); return 0; }
KC_INLINE void kc_cond_destroy(kc_cond_t *c) { (void)c; }
KC_INLINE void kc_cond_signal(kc_cond_t *c) { WakeConditionVariable(c); }
KC_INLINE void kc_cond_broadcast(kc_cond_t *c) { WakeAllConditionVariable(c); }

KC_INLINE int64_t kc_monotonic_ns(void)
{
    static LARGE_INTEGER freq; /* benign race: every thread stores the same value */
    LARGE_INTEGER now;
    if (freq.QuadPart == 0)
        QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (int64_t)((double)now.QuadPart * 1e9 / (double)freq.QuadPart);
}

/* Wait at most ns nanoseconds (rounded up to whole ms); m must be held. */
KC_INLINE void kc_cond_wait_ns(kc_cond_t *c, kc_mutex_t *m, int64_t ns)
{
    int64_t ms = ns <= 0 ? 0 : (ns + 999999) / 1000000;
    if (ms > 0x7ffffffe)
        ms = 0x7ffffffe; /* below INFINITE */
    SleepConditionVariableSRW(c, m, (DWORD)ms, 0);
}

#else /* POSIX */
#include <errno.h>
#include <pthread.h>
#include <time.h>

typedef pthread_mutex_t kc_mutex_t;
typedef pthread_cond_t kc_cond_t;

KC_INLINE int kc_mutex_init(kc_mutex_t *m) { return pthread_mutex_init(m, NULL); }
KC_INLINE void kc_mutex_destroy(kc_mutex_t *m) { pthread_mutex_destroy(m); }
KC_INLINE void kc_mutex_lock(kc_mutex_t *m) { pthread_mutex_lock(m); }
KC_INLINE void kc_mutex_unlock(kc_mutex_t *m) { pthread_mutex_unlock(m); }
KC_INLINE void kc_cond_destroy(kc_cond_t *c) { pthread_cond_destroy(c); }
KC_INLINE void kc_cond_signal(kc_cond_t *c) { pthread_cond_signal(c); }
KC_INLINE void kc_cond_broadcast(kc_cond_t *c) { pthread_cond_broadcast(c); }

KC_INLINE int64_t kc_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#if defined(__APPLE__)
/* No pthread_condattr_setclock: wait with a relative timeout instead. */
KC_INLINE int kc_cond_init(kc_cond_t *c) { return pthread_cond_init(c, NULL); }
KC_INLINE void kc_cond_wait_ns(kc_cond_t *c, kc_mutex_t *m, int64_t ns)
{
    struct timespec rel;
    if (ns < 0)
        ns = 0;
    rel.tv_sec = (time_t)(ns / 1000000000);
    rel.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait_relative_np(c, m, &rel);
}
#else
KC_INLINE int kc_cond_init(kc_cond_t *c)
{
    pthread_condattr_t a;
    int rc = pthread_condattr_init(&a);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc;
}
KC_INLINE void kc_cond_wait_ns(kc_cond_t *c, kc_mutex_t *m, int64_t ns)
{
    struct timespec ts;
    int64_t at;
    if (ns < 0)
        ns = 0;
    if (ns > INT64_C(3153600000000000000)) /* 100 years: keep the sum in range */
        ns = INT64_C(3153600000000000000);
    at = kc_monotonic_ns() + ns;
    ts.tv_sec = (time_t)(at / 1000000000);
    ts.tv_nsec = (long)(at % 1000000000);
    pthread_cond_timedwait(c, m, &ts);
}
#endif
#endif

#endif /* KCORE_SYNC_IMPL_H */
