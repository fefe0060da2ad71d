# The fork hook of fork_impl.h: objects that hold kc_mutex_t locks list themselves, and a fork
# leaves those locks consistent in both processes (taken before it, let go in the parent,
# let go in the child too (the forking thread took them), then the object's reset runs there).
# Threads: kc_fork_track / kc_fork_untrack: any thread, no kcore lock held (in __cinit__, once
# the mutexes are made, and in __dealloc__, before they go). kc_fork_install: at module level.
# reset(owner) runs in the forked child before any Python code, on the one thread there: it may
# touch only C fields of the owner (no references, no GIL, no allocation).
from kcore.sync_impl cimport kc_mutex_t


cdef extern from "fork_impl.h" nogil:
    ctypedef struct kc_fork_obj:
        pass
    void kc_fork_install()
    void kc_fork_track(kc_fork_obj* o, void* owner, kc_mutex_t* a, kc_mutex_t* b,
                       void (*reset)(void*) noexcept nogil)
    void kc_fork_untrack(kc_fork_obj* o)
