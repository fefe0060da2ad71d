/* Fork safety for kcore objects that hold mutexes (a C fork hook, as uvloop installs one).
 * Each module that includes this header keeps its own list of such objects and installs its
 * handlers once, when imported (kc_fork_install at module level): before a fork, the list's
 * lock and then every listed mutex are taken, so no state is copied halfway through an update;
 * after it both processes let them go (the forking thread took them all, and it is the child's
 * one thread), and the child calls each object's reset (waiters of gone threads, locks of
 * another kind that such threads held, ...).
 * Prepare handlers run in reverse order of installation, so a module imported first (a
 * dependency) locks last: send_choice, partition_queue, buffer_pool, which is kcore's lock
 * order (sync_impl.pxd). Nothing here runs on Windows (no fork). */
#ifndef KCORE_FORK_IMPL_H
#define KCORE_FORK_IMPL_H

#include <stddef.h>
#include "sync_impl.h"

typedef struct kc_fork_obj {
    struct kc_fork_obj *prev, *next;
    void *owner;                 /* passed to reset */
    kc_mutex_t *lock[2];         /* taken in this order before a fork; NULL: none */
    void (*reset)(void *owner);  /* in the child, after the locks are let go; or NULL */
    int linked;
} kc_fork_obj;

#ifdef _WIN32
KC_INLINE void kc_fork_install(void) {}
KC_INLINE void kc_fork_track(kc_fork_obj *o, void *owner, kc_mutex_t *a, kc_mutex_t *b,
                             void (*reset)(void *))
{
    (void)o; (void)owner; (void)a; (void)b; (void)reset;
}
KC_INLINE void kc_fork_untrack(kc_fork_obj *o) { (void)o; }
#else
#include <pthread.h>

static pthread_mutex_t kc_fork_list_lock = PTHREAD_MUTEX_INITIALIZER;
static kc_fork_obj *kc_fork_head = NULL;

KC_INLINE void kc_fork_prepare(void)
{
    kc_fork_obj *o;
    int i;
    pthread_mutex_lock(&kc_fork_list_lock);
    for (o = kc_fork_head; o != NULL; o = o->next)
        for (i = 0; i < 2; i++)
            if (o->lock[i] != NULL)
                kc_mutex_lock(o->lock[i]);
}

KC_INLINE void kc_fork_parent(void)
{
    kc_fork_obj *o;
    int i;
    for (o = kc_fork_head; o != NULL; o = o->next)
        for (i = 1; i >= 0; i--)
            if (o->lock[i] != NULL)
                kc_mutex_unlock(o->lock[i]);
    pthread_mutex_unlock(&kc_fork_list_lock);
}

KC_INLINE void kc_fork_child(void)
{
    kc_fork_obj *o;
    kc_fork_parent();  /* this thread took them in kc_fork_prepare */
    for (o = kc_fork_head; o != NULL; o = o->next)
        if (o->reset != NULL)
            o->reset(o->owner);
}

KC_INLINE void kc_fork_install(void)
{
    static int installed = 0;
    if (!installed) {
        installed = 1;
        pthread_atfork(kc_fork_prepare, kc_fork_parent, kc_fork_child);
    }
}

/* List o (inside its owner, whose mutexes a and b are made); kc_fork_untrack before they go. */
KC_INLINE void kc_fork_track(kc_fork_obj *o, void *owner, kc_mutex_t *a, kc_mutex_t *b,
                             void (*reset)(void *))
{
    o->owner = owner;
    o->lock[0] = a;
    o->lock[1] = b;
    o->reset = reset;
    o->prev = NULL;
    pthread_mutex_lock(&kc_fork_list_lock);
    o->next = kc_fork_head;
    if (kc_fork_head != NULL)
        kc_fork_head->prev = o;
    kc_fork_head = o;
    o->linked = 1;
    pthread_mutex_unlock(&kc_fork_list_lock);
}

KC_INLINE void kc_fork_untrack(kc_fork_obj *o)
{
    if (!o->linked)
        return;
    pthread_mutex_lock(&kc_fork_list_lock);
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        kc_fork_head = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    o->linked = 0;
    pthread_mutex_unlock(&kc_fork_list_lock);
}
#endif
#endif
