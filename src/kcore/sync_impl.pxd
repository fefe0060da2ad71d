# The mutex and condition variable of sync_impl.h (pthreads, or Win32 SRW locks), for the kcore
# modules that lock without the GIL (buffer_pool, partition_queue, record_accumulator).
# Threads: every function is callable without the GIL. For every kc_mutex_t in kcore: never wait
# for the GIL while holding one (threads holding the GIL take them: deadlock); a thread holding
# the GIL takes one only around a short section that neither blocks nor takes the GIL.
# kc_cond_wait_ns: m held; it may return early or spuriously: callers re-check in a loop.
# Lock order: ReadyDrain._queues_lock before PartitionQueue.lock; BufferPool.lock before
# its region's lock (region_impl.h); no other lock is taken while one is held. A fork takes
# them all in that order and the child re-makes them (fork_impl.pxd).
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
