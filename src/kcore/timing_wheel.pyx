"""Hierarchical timing wheel after Kafka's TimingWheel, for the producer's timeouts.

Deadlines are rounded UP to whole ticks since start_ms, so an item never fires early and at
most one tick late. Level n has wheel_size buckets of wheel_size**n ticks; overflow levels are
created on demand. Non-empty buckets sit in a heap keyed by expiry (Kafka's DelayQueue), so
advance() jumps straight to the next due bucket; a higher-level bucket that expires is
redistributed to the levels below, exactly as in Kafka.
"""
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from operator import index

__all__ = ["TimingWheel"]

cdef int64_t LIMIT = (<int64_t>1) << 62   # |times| < 2**62 keeps all arithmetic in int64
cdef int32_t READY = 0                    # bucket of items already due when added


cdef int _check_time(int64_t t, str what) except -1:
    if t >= LIMIT or t <= -LIMIT:
        raise OverflowError("%s out of range (|t| < 2**62): %d" % (what, t))
    return 0


cdef inline bint _less(const int64_t* exp, int32_t a, int32_t b) noexcept nogil:
    return exp[a] < exp[b] or (exp[a] == exp[b] and a < b)


cdef class TimingWheel:
    """TimingWheel(tick_ms, wheel_size, start_ms): add/cancel/advance/next_deadline; len()."""

    def __cinit__(self, tick_ms, wheel_size, start_ms):
        tick_ms, wheel_size, start_ms = index(tick_ms), index(wheel_size), index(start_ms)
        if not 1 <= tick_ms < LIMIT:
            raise ValueError("tick_ms must be >= 1, got %d" % tick_ms)
        if not 2 <= wheel_size <= (1 << 20):
            raise ValueError("wheel_size must be in [2, 2**20], got %d" % wheel_size)
        if not 0 <= start_ms < LIMIT:
            raise ValueError("start_ms must be in [0, 2**62), got %d" % start_ms)
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.start_ms = self.now_ms = start_ms
        self.items = []
        self.efree = -1
        self.ready_min = LIMIT
        self.nbuckets = 1
        self.bhead = <int32_t*>malloc(sizeof(int32_t))
        self.btail = <int32_t*>malloc(sizeof(int32_t))
        self.bexp = <int64_t*>malloc(sizeof(int64_t))
        if self.bhead == NULL or self.btail == NULL or self.bexp == NULL:
            raise MemoryError()
        self.bhead[0] = self.btail[0] = -1
        self.bexp[0] = -1
        self._add_level()

    def __dealloc__(self):
        free(self.bhead)
        free(self.btail)
        free(self.bexp)
        free(self.heap)
        free(self.enext)
        free(self.eprev)
        free(self.ebucket)
        free(self.etick)
        free(self.egen)

    # -- storage ---------------------------------------------------------------------------

    cdef int _add_level(self) except -1:
        cdef int L = self.nlevels
        cdef int32_t w = self.wheel_size, n = self.nbuckets + w, i
        cdef int64_t u = 1 if L == 0 else self.unit[L - 1] * w
        if L == TW_MAX_LEVELS:
            raise OverflowError("too many timing wheel levels")
        cdef int32_t* h = <int32_t*>realloc(self.bhead, n * sizeof(int32_t))
        if h == NULL:
            raise MemoryError()
        self.bhead = h
        h = <int32_t*>realloc(self.btail, n * sizeof(int32_t))
        if h == NULL:
            raise MemoryError()
        self.btail = h
        h = <int32_t*>realloc(self.heap, n * sizeof(int32_t))
        if h == NULL:
            raise MemoryError()
        self.heap = h
        cdef int64_t* x = <int64_t*>realloc(self.bexp, n * sizeof(int64_t))
        if x == NULL:
            raise MemoryError()
        self.bexp = x
        for i in range(self.nbuckets, n):
            self.bhead[i] = self.btail[i] = -1
            self.bexp[i] = -1
        self.nbuckets = n
        self.unit[L] = u
        self.span[L] = -1 if u > LIMIT // w else u * w
        self.nlevels = L + 1
        return 0

    cdef int _grow_entries(self) except -1:
        cdef int32_t old = self.ecap, n = 64 if old == 0 else old * 2, i
        if old >= (1 << 30):
            raise MemoryError("too many timers")
        cdef int32_t* a = <int32_t*>realloc(self.enext, n * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.enext = a
        a = <int32_t*>realloc(self.eprev, n * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.eprev = a
        a = <int32_t*>realloc(self.ebucket, n * sizeof(int32_t))
        if a == NULL:
            raise MemoryError()
        self.ebucket = a
        cdef int64_t* t = <int64_t*>realloc(self.etick, n * sizeof(int64_t))
        if t == NULL:
            raise MemoryError()
        self.etick = t
        cdef uint32_t* g = <uint32_t*>realloc(self.egen, n * sizeof(uint32_t))
        if g == NULL:
            raise MemoryError()
        self.egen = g
        self.items.extend([None] * (n - old))
        for i in range(old, n):  # chain the new slots into the free list, lowest first
            self.ebucket[i] = -1
            self.egen[i] = 1
            self.enext[i] = i + 1 if i + 1 < n else self.efree
        self.efree = old
        self.ecap = n
        return 0

    # -- heap of bucket ids by (bexp, id) --------------------------------------------------

    cdef void _heap_push(self, int32_t b) noexcept:
        cdef int32_t i = self.hn, p
        self.hn += 1
        while i > 0:
            p = (i - 1) >> 1
            if not _less(self.bexp, b, self.heap[p]):
                break
            self.heap[i] = self.heap[p]
            i = p
        self.heap[i] = b

    cdef int32_t _heap_pop(self) noexcept:
        cdef int32_t top = self.heap[0], last, i = 0, c
        self.hn -= 1
        last = self.heap[self.hn]
        while True:
            c = 2 * i + 1
            if c >= self.hn:
                break
            if c + 1 < self.hn and _less(self.bexp, self.heap[c + 1], self.heap[c]):
                c += 1
            if not _less(self.bexp, self.heap[c], last):
                break
            self.heap[i] = self.heap[c]
            i = c
        if self.hn > 0:
            self.heap[i] = last
        return top

    # -- lists -----------------------------------------------------------------------------

    cdef void _link(self, int32_t e, int32_t b) noexcept:
        self.ebucket[e] = b
        self.enext[e] = -1
        self.eprev[e] = self.btail[b]
        if self.btail[b] >= 0:
            self.enext[self.btail[b]] = e
        else:
            self.bhead[b] = e
        self.btail[b] = e

    cdef void _unlink(self, int32_t e) noexcept:
        cdef int32_t b = self.ebucket[e]
        if self.eprev[e] >= 0:
            self.enext[self.eprev[e]] = self.enext[e]
        else:
            self.bhead[b] = self.enext[e]
        if self.enext[e] >= 0:
            self.eprev[self.enext[e]] = self.eprev[e]
        else:
            self.btail[b] = self.eprev[e]

    cdef void _release(self, int32_t e) noexcept:
        # Bookkeeping first: dropping the item may run arbitrary code that uses the wheel.
        self.ebucket[e] = -1
        self.egen[e] = self.egen[e] + 1 if self.egen[e] < 0x7fffffff else 1
        self.enext[e] = self.efree
        self.efree = e
        self.count -= 1
        self.items[e] = None

    cdef int _place(self, int32_t e) except -1:
        # Put a not-yet-due entry (tick > cur) in the lowest level whose span covers it.
        cdef int64_t t = self.etick[e], u, base, v
        cdef int L = 0
        cdef int32_t b
        while True:
            if L == self.nlevels:
                self._add_level()
            u = self.unit[L]
            base = self.cur - self.cur % u
            if self.span[L] < 0 or t < base + self.span[L]:
                v = t // u
                b = 1 + L * self.wheel_size + <int32_t>(v % self.wheel_size)
                self._link(e, b)
                if self.bexp[b] < 0:
                    self.bexp[b] = v * u
                    self._heap_push(b)
                return 0
            L += 1

    # -- C API -----------------------------------------------------------------------------

    cdef int64_t add_c(self, int64_t deadline_ms, object item) except -1:
        cdef int32_t e
        cdef int64_t d
        _check_time(deadline_ms, "deadline_ms")
        if self.efree < 0:
            self._grow_entries()
        e = self.efree
        self.efree = self.enext[e]
        if deadline_ms <= self.now_ms:
            self._link(e, READY)  # due already: returned by the next advance
            if deadline_ms < self.ready_min:
                self.ready_min = deadline_ms
        else:
            d = deadline_ms - self.start_ms
            self.etick[e] = d // self.tick_ms + (d % self.tick_ms != 0)
            try:
                self._place(e)
            except BaseException:  # a new level could not be allocated: e stays free
                self.enext[e] = self.efree
                self.efree = e
                raise
        self.items[e] = item
        self.count += 1
        return (<int64_t>self.egen[e] << 32) | e

    cdef bint cancel_c(self, int64_t handle) noexcept:
        cdef int64_t e = handle & 0xffffffff
        if handle <= 0 or e >= self.ecap or self.ebucket[e] < 0 or self.egen[e] != (handle >> 32):
            return False
        self._unlink(<int32_t>e)
        self._release(<int32_t>e)
        return True

    cdef list advance_c(self, int64_t now_ms):
        cdef list out = []
        cdef int32_t e, nxt, b
        cdef int64_t target
        _check_time(now_ms, "now_ms")
        e = self.bhead[READY]
        self.bhead[READY] = self.btail[READY] = -1
        self.ready_min = LIMIT
        while e >= 0:
            nxt = self.enext[e]
            out.append(self.items[e])
            self._release(e)
            e = nxt
        if now_ms <= self.now_ms:
            return out
        self.now_ms = now_ms
        target = (now_ms - self.start_ms) // self.tick_ms
        while self.hn > 0 and self.bexp[self.heap[0]] <= target:
            b = self._heap_pop()
            self.cur = self.bexp[b]
            self.bexp[b] = -1
            e = self.bhead[b]
            self.bhead[b] = self.btail[b] = -1
            while e >= 0:  # fire what is due, hand the rest down to lower levels
                nxt = self.enext[e]
                if self.etick[e] <= self.cur:
                    out.append(self.items[e])
                    self._release(e)
                else:
                    self._place(e)
                e = nxt
        self.cur = target
        return out

    cdef bint next_deadline_c(self, int64_t* out) noexcept:
        cdef int32_t b
        if self.bhead[READY] >= 0:
            out[0] = self.ready_min
            return True
        while self.hn > 0 and self.bhead[self.heap[0]] < 0:  # drop buckets emptied by cancel
            b = self._heap_pop()
            self.bexp[b] = -1
        if self.hn == 0:
            return False
        out[0] = self.start_ms + self.bexp[self.heap[0]] * self.tick_ms
        return True

    # -- Python API ------------------------------------------------------------------------

    def add(self, deadline_ms, item):
        """Schedule item at deadline_ms; returns an opaque handle for cancel()."""
        return self.add_c(PyNumber_Index(deadline_ms), item)

    def cancel(self, handle):
        """True if the item was pending (it will never fire); False if fired or cancelled."""
        handle = PyNumber_Index(handle)
        if not 0 < handle < (1 << 63):
            return False
        return self.cancel_c(handle)

    def advance(self, now_ms):
        """Move the clock to now_ms; returns the items that are due, in due-tick order.

        Items added with a deadline already <= the clock are returned by the next advance.
        """
        return self.advance_c(PyNumber_Index(now_ms))

    def next_deadline(self):
        """Earliest pending bucket expiry in ms (<= every pending due time), None if empty."""
        cdef int64_t ms = 0
        if self.next_deadline_c(&ms):
            return ms
        return None

    def __len__(self):
        return self.count

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)

