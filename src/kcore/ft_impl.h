/* What only a free-threaded CPython (Py_GIL_DISABLED) needs: KC_FT, and kc_ft_lock_t, a lock
 * that serialises threads which the GIL serialises on the other builds. There it is a PyMutex
 * (it lets the thread state go while it waits, so the collector's stop-the-world pauses never
 * wait on it), and every function is a no-op on a GIL build, where the GIL does the job.
 * kc_ft_enter refuses (returns -1) a thread that holds the lock already: a finalizer that the
 * collector ran inside the section, coming back in; the caller raises. Python.h first. */
#ifndef KCORE_FT_IMPL_H
#define KCORE_FT_IMPL_H

#ifdef Py_GIL_DISABLED
#define KC_FT 1
#include "pythread.h"
#include <string.h>
#if defined(_MSC_VER)
#define KC_FT_LOAD(p) (*(volatile unsigned long *)(p))
#define KC_FT_STORE(p, v) (*(volatile unsigned long *)(p) = (v))
#else
#define KC_FT_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define KC_FT_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#endif

typedef struct {
    PyMutex m;
    unsigned long owner; /* the holder's thread ident; 0: none */
} kc_ft_lock_t;

static inline int kc_ft_enter(kc_ft_lock_t *l)
{
    unsigned long me = PyThread_get_thread_ident();
    if (KC_FT_LOAD(&l->owner) == me)
        return -1;
    PyMutex_Lock(&l->m);
    KC_FT_STORE(&l->owner, me);
    return 0;
}

static inline void kc_ft_exit(kc_ft_lock_t *l)
{
    KC_FT_STORE(&l->owner, 0UL);
    PyMutex_Unlock(&l->m);
}

/* The forked child's one thread: the lock's holder (if any) was another thread. */
static inline void kc_ft_reset(kc_ft_lock_t *l)
{
    memset(&l->m, 0, sizeof(l->m));
    l->owner = 0;
}
#else
#define KC_FT 0
typedef struct {
    char unused;
} kc_ft_lock_t;
#define kc_ft_enter(l) ((void)(l), 0)
#define kc_ft_exit(l) ((void)(l))
#define kc_ft_reset(l) ((void)(l))
#endif

#endif /* KCORE_FT_IMPL_H */
