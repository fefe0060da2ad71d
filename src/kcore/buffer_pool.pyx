"""Bounded memory pool for record batches, after the Java producer's BufferPool.

total_bytes of memory: a free list of slab_bytes-sized blocks, a few spare buffers of larger
sizes (a batch that grew gives its buffer back; the next one reuses it without fresh pages),
plus a non-pooled remainder. The bytes come from the pool's own address range (region_impl.h),
so what batches give back stays the pool's for the next one, whatever its size or thread.
Callers that find too little memory wait in a FIFO queue (each on its own condition, without
the GIL) for at most max_block_ms; only the first waiter takes memory as it is released.
Threads: see buffer_pool.pxd.
"""
cimport cython
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport free, malloc, realloc
from operator import index

from kcore.errors import IllegalArgumentError, IllegalStateError, KafkaTimeoutError

from kcore.atomic_impl cimport kc_load_ssize, kc_store_ssize
from kcore.fork_impl cimport *
from kcore.region_impl cimport *
from kcore.sync_impl cimport *

cdef extern from "Python.h":
    # Declared without an exception spec: the error stays set and is re-raised by _reraise.
    int _check_signals "PyErr_CheckSignals" ()

__all__ = ["BufferPool", "PoolBuffer"]

cdef enum:
    SIGNAL_POLL_NS = 100000000  # interruptible waits re-check signals every 100 ms

cdef uint8_t _empty[1]

kc_fork_install()  # at import: before partition_queue's and send_choice's (fork_impl.h)


cdef void _after_fork(void* owner) noexcept nogil:
    # The forked child (fork_impl.pxd): its waiters' threads do not exist there.
    (<BufferPool>owner).head = NULL
    (<BufferPool>owner).tail = NULL
    kc_store_ssize(&(<BufferPool>owner).nwaiters, 0)


cdef int _reraise() except -1:
    return -1  # propagates the exception already set


cdef double _check_ms(object max_block_ms) except -1.0:
    if not isinstance(max_block_ms, (int, float)):
        raise TypeError("max_block_ms must be a number, not %s" % type(max_block_ms).__name__)
    if not max_block_ms >= 0:  # also rejects NaN
        raise ValueError("max_block_ms must be >= 0, got %r" % (max_block_ms,))
    return min(<double>max_block_ms, 1e11)  # ~3 years: keeps ns arithmetic in range


cdef class BufferPool:
    """BufferPool(total_bytes, slab_bytes): thread-safe, never hands out more than total_bytes."""

    def __cinit__(self, total_bytes, slab_bytes):
        total_bytes, slab_bytes = index(total_bytes), index(slab_bytes)
        if total_bytes < 0:
            raise ValueError("total_bytes must be >= 0, got %d" % total_bytes)
        if slab_bytes < 1:
            raise ValueError("slab_bytes must be >= 1, got %d" % slab_bytes)
        self.total_memory = total_bytes
        self.slab_size = slab_bytes
        self.nonpooled = total_bytes
        self.free_cap = min(total_bytes // slab_bytes, 64)
        self.free_list = <uint8_t**>malloc(max(self.free_cap, 1) * sizeof(uint8_t*))
        if self.free_list == NULL:
            raise MemoryError()
        if kc_mutex_init(&self.lock) != 0:
            raise MemoryError("cannot create a mutex")
        self.lock_ok = True
        # Twice the total: blocks are powers of two, so what is out always fits in address space
        if kc_region_init(&self.region, <size_t>total_bytes * 2) != 0:
            raise MemoryError("cannot create a mutex")
        self.region_ok = True
        kc_fork_track(&self.fork_obj, <void*>self, &self.lock, &self.region.lock, _after_fork)

    def __dealloc__(self):
        # No waiter can exist here (each holds a reference); outstanding raw memory is the
        # caller's, PoolBuffers keep the pool alive.
        cdef Py_ssize_t i
        kc_fork_untrack(&self.fork_obj)
        if self.free_list != NULL:
            for i in range(self.nfree):
                self._raw_free(self.free_list[i], self.slab_size)
            free(self.free_list)
        for i in range(self.nspare):
            self._raw_free(self.spare_mem[i], self.spare_size[i])
        if self.region_ok:
            kc_region_destroy(&self.region)
        if self.lock_ok:
            kc_mutex_destroy(&self.lock)

    # -- C level (lock held by the caller for the helpers) --------------------------------

    cdef uint8_t* _raw_alloc(self, Py_ssize_t size) noexcept nogil:
        # Fresh bytes for the accounting's nonpooled memory: from the region, else malloc.
        cdef uint8_t* mem = kc_region_alloc(&self.region, <size_t>size)
        if mem == NULL:
            mem = <uint8_t*>malloc(size if size > 0 else 1)
        return mem

    cdef void _raw_free(self, uint8_t* mem, Py_ssize_t size) noexcept nogil:
        if mem != NULL and not kc_region_free(&self.region, mem, <size_t>size):
            free(mem)

    cdef void _free_up(self, Py_ssize_t size) noexcept nogil:
        # Java's freeUp: turn spares, then free slabs, into non-pooled memory until size is
        # covered.
        cdef Py_ssize_t i
        while self.nspare > 0 and self.nonpooled < size:
            self._raw_free(self.spare_mem[0], self.spare_size[0])
            self.nonpooled += self.spare_size[0]
            self.spare_bytes -= self.spare_size[0]
            self.nspare -= 1
            for i in range(self.nspare):
                self.spare_mem[i] = self.spare_mem[i + 1]
                self.spare_size[i] = self.spare_size[i + 1]
        while self.nfree > 0 and self.nonpooled < size:
            self.nfree -= 1
            self._raw_free(self.free_list[self.nfree], self.slab_size)
            self.nonpooled += self.slab_size

    cdef bint _take_spare(self, Py_ssize_t size, uint8_t** mem) noexcept nogil:
        # A spare of exactly size bytes (the newest), reused as it is: no fresh pages.
        cdef Py_ssize_t i = self.nspare - 1, j
        while i >= 0 and self.spare_size[i] != size:
            i -= 1
        if i < 0:
            return False
        mem[0] = self.spare_mem[i]
        self.spare_bytes -= size
        self.nspare -= 1
        for j in range(i, self.nspare):
            self.spare_mem[j] = self.spare_mem[j + 1]
            self.spare_size[j] = self.spare_size[j + 1]
        return True

    cdef bint _take_now(self, Py_ssize_t size, uint8_t** slab) noexcept nogil:
        if size == self.slab_size and self.nfree > 0:
            self.nfree -= 1
            slab[0] = self.free_list[self.nfree]
            return True
        if size != self.slab_size and self._take_spare(size, slab):
            return True
        if self.nonpooled + self.nfree * self.slab_size + self.spare_bytes >= size:
            self._free_up(size)
            self.nonpooled -= size
            return True
        return False

    cdef void _wake_head(self) noexcept nogil:
        if self.head != NULL and (self.nonpooled > 0 or self.nfree > 0 or self.nspare > 0):
            kc_cond_signal(&self.head.cond)

    cdef int acquire_raw(self, Py_ssize_t size, double max_block_ms, uint8_t** out) noexcept nogil:
        return self._acquire(size, max_block_ms, out, False)

    cdef int _finish(self, uint8_t* mem, Py_ssize_t size, uint8_t** out) noexcept nogil:
        # Memory reserved (mem: a slab, or NULL for size fresh bytes): hand it out.
        if mem == NULL:
            mem = self._raw_alloc(size)
            if mem == NULL:
                kc_mutex_lock(&self.lock)
                self.nonpooled += size
                self._wake_head()
                kc_mutex_unlock(&self.lock)
                return BP_NO_MEMORY
        out[0] = mem
        return BP_OK

    cdef int _try_now(self, Py_ssize_t size, uint8_t** out) noexcept nogil:
        # Non-blocking attempt (no waiters queued and enough memory); cheap with the GIL held.
        cdef uint8_t* mem = NULL
        cdef int rc = BP_WOULD_BLOCK
        out[0] = NULL
        if size < 0 or size > self.total_memory:
            return BP_TOO_LARGE
        kc_mutex_lock(&self.lock)
        if self.closed:
            rc = BP_CLOSED
        elif self.head == NULL and self._take_now(size, &mem):
            rc = BP_OK
        kc_mutex_unlock(&self.lock)
        if rc != BP_OK:
            return rc
        return self._finish(mem, size, out)

    cdef int _acquire(self, Py_ssize_t size, double max_block_ms, uint8_t** out,
                      bint interruptible) noexcept nogil:
        cdef bp_waiter w
        cdef uint8_t* mem = NULL
        cdef Py_ssize_t acc = 0, got
        cdef int rc = BP_OK
        cdef int64_t deadline, left
        cdef int sig
        rc = self._try_now(size, out)
        if rc != BP_WOULD_BLOCK:
            return rc
        rc = BP_OK
        if not max_block_ms >= 0:
            max_block_ms = 0
        elif max_block_ms > 1e11:
            max_block_ms = 1e11
        kc_mutex_lock(&self.lock)
        if self.closed:
            rc = BP_CLOSED
        elif self.head != NULL or not self._take_now(size, &mem):
            # Queue behind earlier waiters (FIFO); only the head accumulates memory.
            if kc_cond_init(&w.cond) != 0:
                kc_mutex_unlock(&self.lock)
                return BP_NO_MEMORY
            w.next = NULL
            w.prev = self.tail
            if self.tail != NULL:
                self.tail.next = &w
            else:
                self.head = &w
            self.tail = &w
            kc_store_ssize(&self.nwaiters, kc_load_ssize(&self.nwaiters) + 1)
            deadline = kc_monotonic_ns() + <int64_t>(max_block_ms * 1e6)
            while True:
                if self.closed:
                    rc = BP_CLOSED
                    break
                if self.head == &w:
                    if acc == 0 and size == self.slab_size and self.nfree > 0:
                        self.nfree -= 1
                        mem = self.free_list[self.nfree]
                        break
                    self._free_up(size - acc)
                    got = min(size - acc, self.nonpooled)
                    self.nonpooled -= got
                    acc += got
                    if acc == size:
                        break
                left = deadline - kc_monotonic_ns()
                if left <= 0:
                    rc = BP_TIMEOUT
                    break
                if interruptible and left > SIGNAL_POLL_NS:
                    left = SIGNAL_POLL_NS
                kc_cond_wait_ns(&w.cond, &self.lock, left)
                if interruptible:
                    kc_mutex_unlock(&self.lock)  # never wait for the GIL holding the lock
                    with gil:
                        sig = _check_signals()
                    kc_mutex_lock(&self.lock)
                    if sig != 0:
                        rc = BP_INTERRUPTED
                        break
            if rc != BP_OK:
                self.nonpooled += acc  # give back a partial reservation
            if w.prev != NULL:
                w.prev.next = w.next
            else:
                self.head = w.next
            if w.next != NULL:
                w.next.prev = w.prev
            else:
                self.tail = w.prev
            kc_store_ssize(&self.nwaiters, kc_load_ssize(&self.nwaiters) - 1)
            kc_cond_destroy(&w.cond)
        self._wake_head()  # memory left over: let the next waiter take it
        kc_mutex_unlock(&self.lock)
        if rc != BP_OK:
            return rc
        return self._finish(mem, size, out)

    cdef void release_raw(self, uint8_t* mem, Py_ssize_t size) noexcept nogil:
        cdef Py_ssize_t cap
        cdef uint8_t** grown
        kc_mutex_lock(&self.lock)
        if size == self.slab_size and self.nfree == self.free_cap:
            cap = min(self.free_cap * 2, self.total_memory // self.slab_size)
            if cap > self.free_cap:
                grown = <uint8_t**>realloc(self.free_list, cap * sizeof(uint8_t*))
                if grown != NULL:  # else: not pooled, the slab just becomes free memory
                    self.free_list = grown
                    self.free_cap = cap
        if size == self.slab_size and self.nfree < self.free_cap:
            self.free_list[self.nfree] = mem
            self.nfree += 1
            mem = NULL
        elif size > self.slab_size and self.nspare < BP_SPARES and self.head == NULL:
            self.spare_mem[self.nspare] = mem
            self.spare_size[self.nspare] = size
            self.nspare += 1
            self.spare_bytes += size
            mem = NULL
        else:
            self.nonpooled += size
        if self.head != NULL:
            kc_cond_signal(&self.head.cond)
        kc_mutex_unlock(&self.lock)
        self._raw_free(mem, size)

    # -- Python level ----------------------------------------------------------------------

    def allocate(self, size, max_block_ms):
        """A PoolBuffer of len size; waits FIFO at most max_block_ms for memory.

        Raises IllegalArgumentError if size > total_memory, KafkaTimeoutError after
        max_block_ms, IllegalStateError if the pool is or gets closed. Contents are unspecified.
        """
        cdef uint8_t* mem = NULL
        cdef int rc
        size = PyNumber_Index(size)
        cdef double ms = _check_ms(max_block_ms)
        if size < 0:
            raise ValueError("size must be >= 0, got %d" % size)
        if size > self.total_memory:
            raise IllegalArgumentError(
                "Attempt to allocate %d bytes, but there is a hard limit of %d on memory "
                "allocations." % (size, self.total_memory))
        cdef Py_ssize_t n = size
        # The mutex is never held while waiting for the GIL, so trying with the GIL is safe and
        # spares two GIL hand-offs; only a caller that must wait releases the GIL.
        rc = self._try_now(n, &mem)
        if rc == BP_WOULD_BLOCK:
            with nogil:
                rc = self._acquire(n, ms, &mem, True)
        if rc != BP_OK:
            _raise_for(self, rc, n, max_block_ms)
        cdef PoolBuffer buf = PoolBuffer.__new__(PoolBuffer)
        buf.pool = self
        buf.data = mem
        buf.size = n
        return buf

    def try_allocate(self, size):
        """A PoolBuffer of len size if the pool can give it at once (no waiter queued, enough
        free memory), else None; never waits."""
        cdef uint8_t* mem = NULL
        size = PyNumber_Index(size)
        if size < 0:
            raise ValueError("size must be >= 0, got %d" % size)
        if size > self.total_memory:
            return None
        cdef Py_ssize_t n = size
        if self._try_now(n, &mem) != BP_OK:
            return None
        cdef PoolBuffer buf = PoolBuffer.__new__(PoolBuffer)
        buf.pool = self
        buf.data = mem
        buf.size = n
        return buf

    def deallocate(self, buf):
        """Return a PoolBuffer from this pool; it becomes empty. Wakes the first waiter.

        TypeError if buf is not a PoolBuffer, ValueError if another pool's, IllegalStateError
        if already deallocated, BufferError while a memoryview (or other export) still uses it.
        """
        if not isinstance(buf, PoolBuffer):
            raise TypeError("expected a PoolBuffer, got %s" % type(buf).__name__)
        cdef PoolBuffer b = <PoolBuffer>buf
        if b.pool is not self:
            raise ValueError("buffer was not allocated by this pool")
        cdef uint8_t* mem
        cdef Py_ssize_t n
        with cython.critical_section(b):  # one deallocate wins; no view is made meanwhile
            if b.released:
                raise IllegalStateError("buffer already deallocated")
            if b.exports:
                raise BufferError("buffer still exported; release its views before "
                                  "deallocating")
            mem, n = b.data, b.size
            b.released = True
            b.data = NULL
            b.size = 0
        self.release_raw(mem, n)

    def close(self):
        """Fail current and future allocations with IllegalStateError (deallocate still works)."""
        cdef bp_waiter* w
        with nogil:
            kc_mutex_lock(&self.lock)
            self.closed = True
            w = self.head
            while w != NULL:
                kc_cond_signal(&w.cond)
                w = w.next
            kc_mutex_unlock(&self.lock)

    @property
    def available_memory(self):
        """Free bytes, pooled slabs included."""
        cdef Py_ssize_t n  # C values only under the lock (no C-API call there)
        kc_mutex_lock(&self.lock)
        n = self.nonpooled + self.nfree * self.slab_size + self.spare_bytes
        kc_mutex_unlock(&self.lock)
        return n

    @property
    def unallocated_memory(self):
        """Free bytes not held as pooled slabs."""
        cdef Py_ssize_t n
        kc_mutex_lock(&self.lock)
        n = self.nonpooled
        kc_mutex_unlock(&self.lock)
        return n

    @property
    def free_slabs(self):
        cdef Py_ssize_t n
        kc_mutex_lock(&self.lock)
        n = self.nfree
        kc_mutex_unlock(&self.lock)
        return n

    @property
    def spare_buffers(self):
        """Sizes of the free larger buffers kept for reuse, oldest first."""
        cdef Py_ssize_t sizes[BP_SPARES]
        cdef Py_ssize_t i, n
        kc_mutex_lock(&self.lock)  # copied out: the list is made once it is let go
        n = self.nspare
        for i in range(n):
            sizes[i] = self.spare_size[i]
        kc_mutex_unlock(&self.lock)
        return [sizes[i] for i in range(n)]

    @property
    def region_bytes(self):
        """Address space reserved for the pool's own memory (region_impl.h): twice
        total_memory rounded up to a power of two; 0 without one (pools under 512 KiB, builds
        with AddressSanitizer, Windows)."""
        return kc_region_size(&self.region)

    @property
    def region_in_use(self):
        """Bytes of that region handed out (blocks are powers of two, 4 KiB and up)."""
        return kc_region_in_use(&self.region)

    @property
    def waiters(self):
        """Number of callers blocked in allocate."""
        return self.nwaiters_hint()

    def queued(self):
        """Java's name for waiters."""
        return self.nwaiters_hint()

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)


cdef _raise_for(BufferPool pool, int rc, Py_ssize_t size, object max_block_ms):
    if rc == BP_INTERRUPTED:
        _reraise()
    if rc == BP_CLOSED:
        raise IllegalStateError("Producer closed while allocating memory")
    if rc == BP_TIMEOUT:
        raise KafkaTimeoutError(
            "Failed to allocate %d bytes within the configured max blocking time %s ms. "
            "Total memory: %d bytes. Available memory: %d bytes. Poolable size: %d bytes"
            % (size, max_block_ms, pool.total_memory, pool.available_memory, pool.slab_size))
    raise MemoryError("cannot allocate %d bytes" % size)


@cython.freelist(64)
@cython.auto_pickle(False)
@cython.no_gc  # refers only to its BufferPool, which holds no Python objects: no cycles
cdef class PoolBuffer:
    """Writable memory from BufferPool.allocate (buffer protocol; use memoryview(buf))."""

    def __getbuffer__(self, Py_buffer* view, int flags):
        with cython.critical_section(self):  # against deallocate and other exports
            PyBuffer_FillInfo(view, self, <void*>(self.data if self.data != NULL else _empty),
                              self.size, 0, flags)
            self.exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        with cython.critical_section(self):
            self.exports -= 1

    def __len__(self):
        with cython.critical_section(self):
            return self.size

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)

    def __dealloc__(self):
        # Dropped without deallocate: the memory is freed but, as in Java, not returned to
        # the pool's accounting.
        if self.pool is not None:
            self.pool._raw_free(self.data, self.size)
