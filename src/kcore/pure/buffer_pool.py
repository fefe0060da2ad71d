"""Pure-Python twin of kcore.buffer_pool: a bounded memory pool after Java's BufferPool.

Same accounting and FIFO waiting (a threading.Condition per waiter, queued in a deque; only
the first waiter takes memory). Buffers are fixed-size bytearrays; their export tracking comes
from CPython itself (a bytearray cannot be resized while a memoryview uses it). Freed slabs are
counted, as are the spare buffers of larger sizes the compiled pool keeps for reuse; a
recycled one is a fresh zeroed bytearray (contents are unspecified anyway).
"""
import threading
import weakref
from collections import deque
from operator import index
from time import monotonic

from kcore.errors import IllegalArgumentError, IllegalStateError, KafkaTimeoutError
from kcore.pure.at_fork import guard_locks

__all__ = ["BufferPool", "PoolBuffer"]

SPARES = 16  # free non-slab buffers kept for reuse (their bytes still count as free)


def _check_ms(max_block_ms):
    if not isinstance(max_block_ms, (int, float)):
        raise TypeError("max_block_ms must be a number, not %s" % type(max_block_ms).__name__)
    if not max_block_ms >= 0:  # also rejects NaN
        raise ValueError("max_block_ms must be >= 0, got %r" % (max_block_ms,))
    return min(float(max_block_ms), 1e11)


def _fixed_size(*_args, **_kw):
    raise BufferError("pool buffers have a fixed size")


class PoolBuffer(bytearray):
    """Writable memory from BufferPool.allocate (buffer protocol; use memoryview(buf))."""

    __slots__ = ("_pool", "_released")

    def __init__(self, *args):
        super().__init__(*args)
        self._pool = None
        self._released = False

    append = extend = insert = pop = remove = clear = __delitem__ = _fixed_size
    __iadd__ = __imul__ = _fixed_size

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)

    def __setitem__(self, key, value):
        if isinstance(key, slice):
            if isinstance(value, int):
                raise TypeError("can assign only bytes, buffers, or iterables of ints")
            value = bytes(value)
            if len(value) != len(range(*key.indices(len(self)))):
                raise BufferError("pool buffers have a fixed size")
        bytearray.__setitem__(self, key, value)


_pools = weakref.WeakSet()


def _after_fork_in_child():
    """A forked child's copy of a pool stays usable: a new lock, and no waiters (their threads
    do not exist here; memory one had gathered is lost to this copy)."""
    for pool in list(_pools):
        pool._lock, pool._waiters = threading.Lock(), deque()


guard_locks(lambda: [pool._lock for pool in list(_pools)], _after_fork_in_child)


class BufferPool:
    """BufferPool(total_bytes, slab_bytes): thread-safe, never hands out more than total_bytes."""

    def __init__(self, total_bytes, slab_bytes):
        total_bytes, slab_bytes = index(total_bytes), index(slab_bytes)
        if total_bytes < 0:
            raise ValueError("total_bytes must be >= 0, got %d" % total_bytes)
        if slab_bytes < 1:
            raise ValueError("slab_bytes must be >= 1, got %d" % slab_bytes)
        self._total = total_bytes
        self._slab = slab_bytes
        self._nonpooled = total_bytes  # free bytes not held as slabs
        self._nfree = 0                # free slabs
        self._spares = []              # sizes of free non-slab buffers kept (oldest first)
        self._lock = threading.Lock()
        self._waiters = deque()        # one Condition per blocked caller, FIFO
        self._closed = False
        _pools.add(self)

    @property
    def total_memory(self):
        return self._total

    @property
    def slab_size(self):
        return self._slab

    def _free_up(self, size):
        while self._nonpooled < size and self._spares:
            self._nonpooled += self._spares.pop(0)
        if self._nonpooled < size and self._nfree:
            n = min(self._nfree, -(-(size - self._nonpooled) // self._slab))
            self._nfree -= n
            self._nonpooled += n * self._slab

    def _take_now(self, size):
        """Reserve size bytes if possible right now; lock held."""
        if size == self._slab and self._nfree:
            self._nfree -= 1
            return True
        if size != self._slab and size in self._spares:  # the newest of that size
            del self._spares[len(self._spares) - 1 - self._spares[::-1].index(size)]
            return True
        if self._nonpooled + self._nfree * self._slab + sum(self._spares) >= size:
            self._free_up(size)
            self._nonpooled -= size
            return True
        return False

    def _wake_head(self):
        if self._waiters and (self._nonpooled > 0 or self._nfree > 0 or self._spares):
            self._waiters[0].notify()

    def allocate(self, size, max_block_ms):
        """A PoolBuffer of len size; waits FIFO at most max_block_ms for memory.

        Raises IllegalArgumentError if size > total_memory, KafkaTimeoutError after
        max_block_ms, IllegalStateError if the pool is or gets closed. Contents are unspecified.
        """
        size = index(size)
        ms = _check_ms(max_block_ms)
        if size < 0:
            raise ValueError("size must be >= 0, got %d" % size)
        if size > self._total:
            raise IllegalArgumentError(
                "Attempt to allocate %d bytes, but there is a hard limit of %d on memory "
                "allocations." % (size, self._total))
        with self._lock:
            try:
                if self._closed:
                    raise IllegalStateError("Producer closed while allocating memory")
                if self._waiters or not self._take_now(size):
                    self._wait_for(size, ms, max_block_ms)  # FIFO: queue behind waiters
            finally:
                self._wake_head()
        return self._buffer(size)

    def _buffer(self, size):
        """A PoolBuffer for memory already taken from the pool (given back if that fails)."""
        try:
            buf = PoolBuffer(size)
        except BaseException:
            with self._lock:
                self._nonpooled += size
                self._wake_head()
            raise
        buf._pool = self
        return buf

    def try_allocate(self, size):
        """A PoolBuffer of len size if the pool can give it at once (no waiter queued, enough
        free memory), else None; never waits."""
        size = index(size)
        if size < 0:
            raise ValueError("size must be >= 0, got %d" % size)
        if size > self._total:
            return None
        with self._lock:
            if self._closed or self._waiters or not self._take_now(size):
                return None
        return self._buffer(size)

    def _wait_for(self, size, ms, max_block_ms):
        me = threading.Condition(self._lock)
        self._waiters.append(me)
        acc = 0
        deadline = monotonic() + ms / 1000.0
        try:
            while True:
                if self._closed:
                    raise IllegalStateError("Producer closed while allocating memory")
                if self._waiters[0] is me:
                    if acc == 0 and size == self._slab and self._nfree:
                        self._nfree -= 1
                        acc = size
                        return
                    self._free_up(size - acc)
                    got = min(size - acc, self._nonpooled)
                    self._nonpooled -= got
                    acc += got
                    if acc == size:
                        return
                left = deadline - monotonic()
                if left <= 0:
                    self._nonpooled += acc  # give back a partial reservation
                    acc = 0
                    raise KafkaTimeoutError(
                        "Failed to allocate %d bytes within the configured max blocking time "
                        "%s ms. Total memory: %d bytes. Available memory: %d bytes. Poolable "
                        "size: %d bytes" % (size, max_block_ms, self._total,
                                            self._available(),
                                            self._slab))
                me.wait(left)
        except BaseException:
            self._nonpooled += acc  # give back a partial reservation
            raise
        finally:
            self._waiters.remove(me)

    def deallocate(self, buf):
        """Return a PoolBuffer from this pool; it becomes empty. Wakes the first waiter.

        TypeError if buf is not a PoolBuffer, ValueError if another pool's, IllegalStateError
        if already deallocated, BufferError while a memoryview (or other export) still uses it.
        """
        if not isinstance(buf, PoolBuffer):
            raise TypeError("expected a PoolBuffer, got %s" % type(buf).__name__)
        if buf._pool is not self:
            raise ValueError("buffer was not allocated by this pool")
        with self._lock:
            if buf._released:
                raise IllegalStateError("buffer already deallocated")
            size = len(buf)
            try:  # a resize fails while anything exports the buffer (an empty one is grown
                if not size:  # to probe it: only then can a view made meanwhile see a byte)
                    bytearray.append(buf, 0)
                bytearray.clear(buf)
            except BufferError:
                raise BufferError("buffer still exported; release its views before "
                                  "deallocating") from None
            buf._released = True
            if size == self._slab and self._nfree < self._total // self._slab:
                self._nfree += 1
            elif size > self._slab and len(self._spares) < SPARES and not self._waiters:
                self._spares.append(size)  # a grown batch's size: kept for the next one
            else:
                self._nonpooled += size
            if self._waiters:
                self._waiters[0].notify()

    def close(self):
        """Fail current and future allocations with IllegalStateError (deallocate still works)."""
        with self._lock:
            self._closed = True
            for w in self._waiters:
                w.notify()

    @property
    def available_memory(self):
        """Free bytes, pooled slabs included."""
        with self._lock:
            return self._available()

    def _available(self):
        return self._nonpooled + self._nfree * self._slab + sum(self._spares)

    @property
    def unallocated_memory(self):
        """Free bytes not held as pooled slabs."""
        return self._nonpooled

    @property
    def free_slabs(self):
        return self._nfree

    @property
    def spare_buffers(self):
        """Sizes of the free larger buffers kept for reuse, oldest first."""
        with self._lock:
            return list(self._spares)

    @property
    def waiters(self):
        """Number of callers blocked in allocate."""
        return len(self._waiters)

    def queued(self):
        """Java's name for waiters."""
        return len(self._waiters)

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)
