# The mutex and condition variable of sync_impl.h (pthreads, or Win32 SRW locks), for the kcore
# modules that lock without the GIL (buffer_pool, partition_queue, record_accumulator).
# Threads: every function is callable without the GIL. For every kc_mutex_t in kcore: never wait
# for the GIL while holding one (threads holding the GIL take them: deadlock); a thread holding
# the GIL (or, free-threaded, attached to the interpreter) takes one only around a short
# section of C that neither blocks nor calls the C-API (Py_INCREF aside: no allocation, no
# decref, no container operation, nothing that can reach a stop-the-world pause, which a
# thread waiting in kc_mutex_lock could not join). A lock held across C-API work is a
# kc_ft_lock_t (ft_impl.pxd: a PyMutex, which lets the thread state go while it waits) or a
# Python lock.
# kc_cond_wait_ns: m held; it may return early or spuriously: callers re-check in a loop.
# Lock order, first to last (a thread holding one takes only later ones):
#   RecordAccumulator._topics_lock (RLock) -> SendChoice._queues_lock;
#   PartitionQueue.append_lock (kc_ft_lock_t) -> PartitionQueue.lock -> BufferPool.lock ->
#   its region's lock (region_impl.h); SendChoice._queues_lock -> PartitionQueue.lock;
#   MemoryRecords.lock -> BufferPool.lock. Leaves (nothing kcore's taken under them):
#   ProducerBatch.seg_lock, the futures' and the partitioner's locks (their .pxd).
# A fork takes the kc_mutex_t ones in that order; both processes let them go (fork_impl.pxd).
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
