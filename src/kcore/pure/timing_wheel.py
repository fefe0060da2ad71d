"""Pure-Python twin of kcore.timing_wheel: hierarchical timing wheel, never fires early.

Same algorithm and layout as the compiled module: deadlines rounded up to ticks since
start_ms, buckets 0 (already due) and 1 + level * wheel_size + slot, entries doubly linked in
parallel lists, non-empty buckets in a heap keyed by (expiry tick, bucket id).
"""
from heapq import heappop, heappush
from operator import index

__all__ = ["TimingWheel"]

_LIMIT = 1 << 62  # |times| < 2**62, as in the compiled module
_MAX_LEVELS = 64
_READY = 0


def _check_time(t, what):
    t = index(t)
    if not -_LIMIT < t < _LIMIT:
        raise OverflowError("%s out of range (|t| < 2**62): %d" % (what, t))
    return t


class TimingWheel:
    """TimingWheel(tick_ms, wheel_size, start_ms): add/cancel/advance/next_deadline; len()."""

    def __init__(self, tick_ms, wheel_size, start_ms):
        tick_ms, wheel_size, start_ms = index(tick_ms), index(wheel_size), index(start_ms)
        if not 1 <= tick_ms < _LIMIT:
            raise ValueError("tick_ms must be >= 1, got %d" % tick_ms)
        if not 2 <= wheel_size <= (1 << 20):
            raise ValueError("wheel_size must be in [2, 2**20], got %d" % wheel_size)
        if not 0 <= start_ms < _LIMIT:
            raise ValueError("start_ms must be in [0, 2**62), got %d" % start_ms)
        self._tick, self._w, self._start = tick_ms, wheel_size, start_ms
        self._now = start_ms
        self._cur = 0                      # current tick
        self._unit, self._span = [], []    # per level; span None = unbounded
        self._bhead, self._btail, self._bexp = [-1], [-1], [-1]
        self._heap = []                    # (bexp, bucket id)
        self._enext, self._eprev, self._ebucket, self._etick, self._egen = [], [], [], [], []
        self._items = []
        self._efree = -1
        self._count = 0
        self._ready_min = _LIMIT
        self._add_level()

    tick_ms = property(lambda self: self._tick)
    wheel_size = property(lambda self: self._w)
    start_ms = property(lambda self: self._start)
    now_ms = property(lambda self: self._now, doc="latest time passed to advance")

    def _add_level(self):
        if len(self._unit) == _MAX_LEVELS:
            raise OverflowError("too many timing wheel levels")
        u = self._unit[-1] * self._w if self._unit else 1
        self._unit.append(u)
        self._span.append(None if u > _LIMIT // self._w else u * self._w)
        self._bhead.extend([-1] * self._w)
        self._btail.extend([-1] * self._w)
        self._bexp.extend([-1] * self._w)

    def _new_entry(self):
        if self._efree < 0:
            old = len(self._items)
            if old >= (1 << 30):
                raise MemoryError("too many timers")
            n = 64 if old == 0 else old * 2
            self._enext.extend(range(old + 1, n))
            self._enext.append(self._efree)
            self._eprev.extend([-1] * (n - old))
            self._ebucket.extend([-1] * (n - old))
            self._etick.extend([0] * (n - old))
            self._egen.extend([1] * (n - old))
            self._items.extend([None] * (n - old))
            self._efree = old
        e = self._efree
        self._efree = self._enext[e]
        return e

    def _link(self, e, b):
        self._ebucket[e] = b
        self._enext[e] = -1
        t = self._btail[b]
        self._eprev[e] = t
        if t >= 0:
            self._enext[t] = e
        else:
            self._bhead[b] = e
        self._btail[b] = e

    def _unlink(self, e):
        b, p, n = self._ebucket[e], self._eprev[e], self._enext[e]
        if p >= 0:
            self._enext[p] = n
        else:
            self._bhead[b] = n
        if n >= 0:
            self._eprev[n] = p
        else:
            self._btail[b] = p

    def _release(self, e):
        # Bookkeeping first: dropping the item may run arbitrary code that uses the wheel.
        self._ebucket[e] = -1
        g = self._egen[e]
        self._egen[e] = g + 1 if g < 0x7FFFFFFF else 1
        self._enext[e] = self._efree
        self._efree = e
        self._count -= 1
        self._items[e] = None

    def _place(self, e):
        t = self._etick[e]
        level = 0
        while True:
            if level == len(self._unit):
                self._add_level()
            u, span = self._unit[level], self._span[level]
            if span is None or t < self._cur - self._cur % u + span:
                v = t // u
                b = 1 + level * self._w + v % self._w
                self._link(e, b)
                if self._bexp[b] < 0:
                    self._bexp[b] = v * u
                    heappush(self._heap, (v * u, b))
                return
            level += 1

    def add(self, deadline_ms, item):
        """Schedule item at deadline_ms; returns an opaque handle for cancel()."""
        deadline_ms = _check_time(deadline_ms, "deadline_ms")
        e = self._new_entry()
        if deadline_ms <= self._now:
            self._link(e, _READY)  # due already: returned by the next advance
            if deadline_ms < self._ready_min:
                self._ready_min = deadline_ms
        else:
            self._etick[e] = -((self._start - deadline_ms) // self._tick)  # ceil
            try:
                self._place(e)
            except BaseException:
                self._enext[e] = self._efree
                self._efree = e
                raise
        self._items[e] = item
        self._count += 1
        return (self._egen[e] << 32) | e

    def cancel(self, handle):
        """True if the item was pending (it will never fire); False if fired or cancelled."""
        handle = index(handle)
        if not 0 < handle < (1 << 63):
            return False
        e = handle & 0xFFFFFFFF
        if e >= len(self._items) or self._ebucket[e] < 0 or self._egen[e] != handle >> 32:
            return False
        self._unlink(e)
        self._release(e)
        return True

    def advance(self, now_ms):
        """Move the clock to now_ms; returns the items that are due, in due-tick order.

        Items added with a deadline already <= the clock are returned by the next advance.
        """
        now_ms = _check_time(now_ms, "now_ms")
        out = []
        items, enext, etick = self._items, self._enext, self._etick
        e = self._bhead[_READY]
        self._bhead[_READY] = self._btail[_READY] = -1
        self._ready_min = _LIMIT
        while e >= 0:
            nxt = enext[e]
            out.append(items[e])
            self._release(e)
            e = nxt
        if now_ms <= self._now:
            return out
        self._now = now_ms
        target = (now_ms - self._start) // self._tick
        heap, bexp = self._heap, self._bexp
        while heap and heap[0][0] <= target:
            cur, b = heappop(heap)
            self._cur = cur
            bexp[b] = -1
            e = self._bhead[b]
            self._bhead[b] = self._btail[b] = -1
            while e >= 0:  # fire what is due, hand the rest down to lower levels
                nxt = enext[e]
                if etick[e] <= cur:
                    out.append(items[e])
                    self._release(e)
                else:
                    self._place(e)
                e = nxt
        self._cur = target
        return out

    def next_deadline(self):
        """Earliest pending bucket expiry in ms (<= every pending due time), None if empty."""
        if self._bhead[_READY] >= 0:
            return self._ready_min
        heap = self._heap
        while heap and self._bhead[heap[0][1]] < 0:  # drop buckets emptied by cancel
            self._bexp[heappop(heap)[1]] = -1
        if not heap:
            return None
        return self._start + heap[0][0] * self._tick

    def __len__(self):
        return self._count

    def __reduce_ex__(self, protocol):
        raise TypeError("a %s cannot be pickled or copied" % type(self).__name__)
