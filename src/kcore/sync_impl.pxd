# The mutex and condition variable of sync_impl.h (pthreads, or Win32 SRW locks), for the kcore
# modules that lock without the GIL (buffer_pool, partition_queue, record_accumulator).
from libc.stdint cimport int64_t


cdef extern from "sync_impl.h" nogil:
    ctypedef struct kc_mutex_t:
        pass
    ctypedef struct kc_cond_t:
        pass
    int kc_mutex_init(kc_mutex_t* m)
    void kc_mutex_destroy(kc_mutex_t* m)
    void kc_mutex_lock(kc_mutex_t* m)
    void kc_mutex_unlock(kc_mutex_t* m)
    int kc_cond_init(kc_cond_t* c)
    void kc_cond_destroy(kc_cond_t* c)
    void kc_cond_signal(kc_cond_t* c)
    void kc_cond_wait_ns(kc_cond_t* c, kc_mutex_t* m, int64_t ns)
    int64_t kc_monotonic_ns()
