# ft_impl.h: KC_FT (1 on a free-threaded CPython) and kc_ft_lock_t, the lock that serialises
# what the GIL serialises on the other builds (a PyMutex there; no-ops with the GIL).
# Threads: kc_ft_enter / kc_ft_exit by an attached thread (with a thread state), never while
# holding a kc_mutex_t (it may wait); it lets the thread state go while it waits. -1 from
# kc_ft_enter: this thread holds it already (re-entered from a finalizer): raise, do not wait.
# kc_ft_reset: a forked child's one thread, before any Python code.


cdef extern from "ft_impl.h" nogil:
    const bint KC_FT
    ctypedef struct kc_ft_lock_t:
        pass
    int kc_ft_enter(kc_ft_lock_t* l)
    void kc_ft_exit(kc_ft_lock_t* l)
    void kc_ft_reset(kc_ft_lock_t* l)
