# Bounded memory pool with a free list of slab-sized blocks (Java's producer BufferPool).
# C-level API for other kcore modules (e.g. the accumulator):
#
#     cdef uint8_t* mem
#     with nogil:
#         rc = pool.acquire_raw(n, max_block_ms, &mem)   # BP_OK: mem holds n bytes
#         ...
#         pool.release_raw(mem, n)                       # exactly once, with the same n
# acquire_raw may block: call it without the GIL (threads that free memory may need it).
#
# Threads (the one place these rules are written; buffer_pool.pyx points here):
# - Every field from nonpooled on (the free list, spares, the waiter FIFO, closed, nwaiters):
#   read and written under `lock`, by any thread, with or without the GIL. A thread holding the
#   GIL (attached) takes `lock` only for a short section that never waits and makes no C-API
#   call (_try_now, release_raw, properties). One exception: nwaiters is also read without
#   `lock` (nwaiters_hint(): the Sender's scans, the waiters property), a hint: every access to
#   it is atomic (kc_load_ssize / kc_store_ssize; written under `lock`, or in the fork child).
# - total_memory, slab_size, region_ok, lock_ok: set in __cinit__, then read-only.
# - region: its own lock (region_impl.pxd), taken after `lock` or with no lock held.
# - bp_waiter: on the waiting thread's stack; linked, unlinked and signalled under `lock`.
# - fork (fork_impl.pxd): before a fork `lock`, then the region's lock, are taken (so the copy
#   is never caught halfway through an update); the child lets both go and empties the waiter
#   FIFO (its threads do not exist there; memory a waiter had gathered is lost to the child's
#   copy). The copy stays usable in the child; fork_obj is the hook's, under its own lock.
# nogil: acquire_raw (may block: without the GIL), release_raw, _try_now: any thread, no lock
#   held. _take_now, _take_spare, _free_up, _wake_head: with `lock` held. _finish, _raw_alloc,
#   _raw_free: without it.
from libc.stdint cimport int64_t, uint8_t

from kcore.atomic_impl cimport kc_load_ssize
from kcore.fork_impl cimport kc_fork_obj
from kcore.region_impl cimport kc_region
from kcore.sync_impl cimport kc_cond_t, kc_mutex_t

# acquire_raw results
cdef enum:
    BP_OK = 0
    BP_TIMEOUT = 1        # no memory within max_block_ms
    BP_CLOSED = 2         # close() was called (before or while waiting)
    BP_TOO_LARGE = 3      # size > total memory: can never succeed
    BP_NO_MEMORY = 4      # malloc failed (pool accounting left unchanged)
    BP_INTERRUPTED = 5    # only from the Python-level allocate: a signal handler raised
    BP_WOULD_BLOCK = 6    # internal (_try_now): must queue

cdef enum:
    BP_SPARES = 16        # free non-slab buffers kept (their bytes still count as free)

# One blocked caller: lives on its own stack, linked into the pool's FIFO.
ctypedef struct bp_waiter:
    kc_cond_t cond
    bp_waiter* prev
    bp_waiter* next


cdef class BufferPool:
    cdef kc_mutex_t lock
    cdef bint lock_ok
    cdef readonly Py_ssize_t total_memory
    cdef readonly Py_ssize_t slab_size
    cdef Py_ssize_t nonpooled        # free bytes not held as slabs
    cdef uint8_t** free_list         # stack of free slabs, grown on demand
    cdef Py_ssize_t nfree
    cdef Py_ssize_t free_cap
    cdef uint8_t* spare_mem[BP_SPARES]    # free buffers of other sizes (grown batches), oldest
    cdef Py_ssize_t spare_size[BP_SPARES]  # first, kept for a request of the same size
    cdef Py_ssize_t nspare
    cdef Py_ssize_t spare_bytes
    cdef bp_waiter* head             # FIFO of blocked callers; only the head takes memory
    cdef bp_waiter* tail
    cdef Py_ssize_t nwaiters
    cdef bint closed
    cdef kc_region region            # where the memory comes from (malloc when it is full)
    cdef bint region_ok
    cdef kc_fork_obj fork_obj        # listed for the fork hook while lock and region live

    # Block at most max_block_ms (without the GIL) for size bytes; FIFO-fair. BP_OK sets
    # out[0] to memory the caller owns until release_raw (a recycled slab when size equals
    # slab_size and one is free, else malloc'd). Other results leave out[0] NULL.
    cdef int acquire_raw(self, Py_ssize_t size, double max_block_ms, uint8_t** out) noexcept nogil
    # Give back memory from acquire_raw (same size); wakes the first waiter.
    cdef void release_raw(self, uint8_t* mem, Py_ssize_t size) noexcept nogil
    cdef int _acquire(self, Py_ssize_t size, double max_block_ms, uint8_t** out,
                      bint interruptible) noexcept nogil
    cdef int _try_now(self, Py_ssize_t size, uint8_t** out) noexcept nogil
    cdef int _finish(self, uint8_t* mem, Py_ssize_t size, uint8_t** out) noexcept nogil
    cdef bint _take_now(self, Py_ssize_t size, uint8_t** slab) noexcept nogil
    cdef bint _take_spare(self, Py_ssize_t size, uint8_t** mem) noexcept nogil
    cdef void _free_up(self, Py_ssize_t size) noexcept nogil
    cdef void _wake_head(self) noexcept nogil
    cdef uint8_t* _raw_alloc(self, Py_ssize_t size) noexcept nogil
    cdef void _raw_free(self, uint8_t* mem, Py_ssize_t size) noexcept nogil

    # Callers blocked in acquire: a hint, read without `lock` (any thread, no GIL needed).
    cdef inline Py_ssize_t nwaiters_hint(self) noexcept nogil:
        return kc_load_ssize(&self.nwaiters)


# A writable buffer of len == size handed out by BufferPool.allocate. It tracks buffer
# exports so deallocate can refuse while a memoryview still uses the memory; after
# deallocate it is empty (len 0).
# Threads: any. data, size, exports, released are read and written inside a critical section
# on the PoolBuffer (__getbuffer__, __releasebuffer__, __len__, BufferPool.deallocate: one
# deallocate wins, and no view is made of memory given back); __dealloc__ (the last
# reference) alone reads them without one.
cdef class PoolBuffer:
    cdef BufferPool pool
    cdef uint8_t* data
    cdef Py_ssize_t size
    cdef Py_ssize_t exports
    cdef bint released
