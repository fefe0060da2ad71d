"""TimingWheel: exactly once, never early, at most one tick late; cancel; next_deadline.

Random schedules are checked against a plain reference model of that contract.
"""
import gc
import random
import weakref

import pytest

import kcore


def due_time(deadline, clock, start, tick):
    """When the contract says an item added at `clock` must have fired by."""
    if deadline <= clock:
        return None  # already due: the next advance returns it
    return start + -((start - deadline) // tick) * tick  # start + ceil((d - start)/tick)*tick


class Model:
    """Reference: pending items with their deadline and latest allowed firing time."""

    def __init__(self, wheel, start, tick):
        self.wheel, self.start, self.tick = wheel, start, tick
        self.clock = start
        self.pending = {}  # item -> (handle, deadline, due or None)
        self.fired = set()
        self.cancelled = set()
        self.n = 0
        self.handles = {}

    def add(self, deadline):
        item = self.n
        self.n += 1
        h = self.wheel.add(deadline, item)
        self.pending[item] = (h, deadline, due_time(deadline, self.clock, self.start, self.tick))
        self.handles[item] = h
        return item

    def cancel(self, item):
        if item in self.pending:
            assert self.wheel.cancel(self.pending.pop(item)[0]) is True
            self.cancelled.add(item)
        else:  # fired or cancelled already
            h = self.handles[item]
            assert self.wheel.cancel(h) is False

    def advance(self, now):
        out = self.wheel.advance(now)
        limit = max(now, self.clock)
        self.clock = limit
        dues = []
        for item in out:
            assert item in self.pending, "fired twice, cancelled or unknown: %r" % item
            h, deadline, due = self.pending.pop(item)
            assert deadline <= limit, "fired early: deadline %d at %d" % (deadline, now)
            self.fired.add(item)
            dues.append(float("-inf") if due is None else due)
        late = [i for i, (_, d, due) in self.pending.items() if due is None or due <= now]
        assert not late, "not fired in time: %r" % [(i, self.pending[i]) for i in late[:5]]
        assert dues == sorted(dues), "not in due order"
        self.check()
        return out

    def check(self):
        assert len(self.wheel) == len(self.pending)
        nd = self.wheel.next_deadline()
        if not self.pending:
            assert nd is None
        else:
            earliest = min(d if due is None else due for _, d, due in self.pending.values())
            assert nd is not None and nd <= earliest


def test_basic_rounding_never_early_one_tick_late(k):
    w = k.TimingWheel(10, 20, 1000)
    assert (w.tick_ms, w.wheel_size, w.start_ms, w.now_ms) == (10, 20, 1000, 1000)
    w.add(1005, "a")  # due tick 1 -> fires at 1010
    w.add(1010, "b")  # exactly on a tick boundary
    w.add(1011, "c")  # -> 1020
    assert len(w) == 3 and w.next_deadline() == 1010
    assert w.advance(1004) == []
    assert w.advance(1009) == []
    assert w.advance(1010) == ["a", "b"]
    assert w.next_deadline() == 1020 and w.now_ms == 1010
    assert w.advance(1019) == []
    assert w.advance(1020) == ["c"]
    assert len(w) == 0 and w.next_deadline() is None


def test_already_due_items_fire_on_next_advance(k):
    w = k.TimingWheel(5, 8, 100)
    w.advance(200)
    w.add(150, "past")
    w.add(200, "now")
    w.add(-7, "negative")
    assert len(w) == 3 and w.next_deadline() == -7
    assert w.advance(200) == ["past", "now", "negative"]  # even without moving the clock
    assert w.advance(100) == [] and w.now_ms == 200  # time never goes back
    w.add(201, "x")
    assert w.advance(204) == [] and w.advance(205) == ["x"]


def test_overflow_levels(k):
    w = k.TimingWheel(1, 2, 0)  # many levels for modest times
    deadlines = [1, 2, 3, 7, 8, 100, 1023, 1024, 1025, 10**6, 2**40 + 3]
    for d in deadlines:
        w.add(d, d)
    got = []
    for now in sorted(set(deadlines)) + [2**40 + 10]:
        assert w.advance(now - 1) == []
        got += w.advance(now)
    assert got == deadlines and len(w) == 0


def test_cancel(k):
    w = k.TimingWheel(1, 16, 0)
    h1, h2, h3 = w.add(5, "a"), w.add(500, "b"), w.add(0, "due")
    assert w.cancel(h2) is True and w.cancel(h2) is False
    assert w.cancel(h3) is True
    assert len(w) == 1
    assert w.advance(1000) == ["a"]
    assert w.cancel(h1) is False  # fired
    h4 = w.add(1001, "c")  # reuses a freed slot: old handles must stay dead
    assert w.cancel(h1) is False and w.cancel(h2) is False and len(w) == 1
    for junk in (0, -1, 12345, 1 << 62, 1 << 70, -(1 << 70)):
        assert w.cancel(junk) is False
    with pytest.raises(TypeError):
        w.cancel("x")
    with pytest.raises(TypeError):
        w.cancel(1.0)
    assert w.cancel(h4) is True and len(w) == 0 and w.advance(5000) == []


def test_next_deadline_after_cancel(k):
    w = k.TimingWheel(1, 4, 0)
    h = w.add(3, "a")
    w.add(40, "b")
    assert w.next_deadline() == 3
    w.cancel(h)
    nd = w.next_deadline()
    assert nd is not None and nd <= 40
    assert w.advance(39) == [] and w.advance(40) == ["b"]
    assert w.next_deadline() is None


def test_argument_errors(k):
    for args in ((0, 10, 0), (1, 1, 0), (1, 10, -1), (1, 2**21, 0), (1, 10, 2**62)):
        with pytest.raises(ValueError):
            k.TimingWheel(*args)
    with pytest.raises(TypeError):
        k.TimingWheel(1.0, 10, 0)
    w = k.TimingWheel(1, 10, 0)
    for bad in (2**62, -(2**62), 2**64, -(2**70)):
        with pytest.raises(OverflowError):
            w.add(bad, "x")
        with pytest.raises(OverflowError):
            w.advance(bad)
    with pytest.raises(TypeError):
        w.add(1.5, "x")
    with pytest.raises(TypeError):
        w.advance(None)
    assert len(w) == 0
    w.add(2**62 - 1, "far")
    assert w.next_deadline() <= 2**62 - 1  # a coarse level: expiry of its bucket
    assert w.advance(2**62 - 2) == [] and w.advance(2**62 - 1) == ["far"]


def test_cannot_be_copied(k):
    import copy
    import pickle

    w = k.TimingWheel(1, 8, 0)
    w.add(5, "a")
    for fn in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            fn(w)


def test_references_are_dropped(k):
    class Obj:
        pass

    w = k.TimingWheel(1, 8, 0)
    a, b = Obj(), Obj()
    ra, rb = weakref.ref(a), weakref.ref(b)
    ha = w.add(10, a)
    w.add(20, b)
    del a, b
    w.cancel(ha)
    gc.collect()
    assert ra() is None and rb() is not None
    assert [type(x) for x in w.advance(20)] == [Obj]
    gc.collect()
    assert rb() is None


def test_reentrant_use_from_item_finalizer(k):
    w = k.TimingWheel(1, 8, 0)

    class Reenter:
        def __del__(self):
            w.add(7, "from __del__")

    h = w.add(5, Reenter())
    assert w.cancel(h) is True  # the finalizer adds while cancel finishes
    assert len(w) == 1 and w.advance(7) == ["from __del__"]


@pytest.mark.parametrize("seed", range(6))
def test_random_schedule_against_model(k, seed):
    rng = random.Random(seed)
    tick = rng.choice([1, 3, 10])
    size = rng.choice([2, 4, 20, 64])
    start = rng.randrange(0, 10**6)
    w = k.TimingWheel(tick, size, start)
    m = Model(w, start, tick)
    live = []
    for step in range(1500):
        r = rng.random()
        if r < 0.55:
            kind = rng.random()
            if kind < 0.6:
                d = m.clock + rng.randrange(-5 * tick, 60 * tick)  # near
            elif kind < 0.9:
                d = m.clock + rng.randrange(0, 10**6)  # far: overflow levels
            else:
                d = m.clock + rng.randrange(0, 10**11)  # very far
            live.append(m.add(d))
        elif r < 0.7 and live:
            m.cancel(live.pop(rng.randrange(len(live))))
        elif r < 0.72 and (m.fired or m.cancelled):
            m.cancel(rng.choice(sorted(m.fired | m.cancelled)))
        else:
            jump = rng.random()
            if jump < 0.8:
                now = m.clock + rng.randrange(0, 3 * tick)
            elif jump < 0.95:
                now = m.clock + rng.randrange(0, 10**5)
            elif jump < 0.98:
                now = m.clock - rng.randrange(0, 50)  # backwards: a no-op
            else:
                nd = w.next_deadline()
                now = nd if nd is not None else m.clock
            m.advance(now)
    m.advance(m.clock + 10**12)  # everything left fires
    assert not m.pending and len(w) == 0
    assert m.fired.isdisjoint(m.cancelled) and len(m.fired) + len(m.cancelled) == m.n


@pytest.mark.parametrize("seed", range(3))
def test_dense_schedule_one_ms_steps(k, seed):
    rng = random.Random(100 + seed)
    w = k.TimingWheel(1, 20, 0)
    m = Model(w, 0, 1)
    for _ in range(3000):
        m.add(rng.randrange(1, 1000))
    for now in range(1, 1001):
        m.advance(now)
        if now % 7 == 0:
            m.add(now + rng.randrange(0, 3000))
    m.advance(5000)
    assert len(m.fired) == m.n


def test_twins_agree(both):
    py, c = both
    for seed in range(3):
        rng = random.Random(seed)
        wp, wc = py.TimingWheel(2, 8, 50), c.TimingWheel(2, 8, 50)
        hp, hc = [], []
        now = 50
        for _ in range(2000):
            r = rng.random()
            if r < 0.5:
                d = now + rng.choice([rng.randrange(-3, 40), rng.randrange(0, 10**5)])
                hp.append(wp.add(d, d))
                hc.append(wc.add(d, d))
            elif r < 0.6 and hp:
                i = rng.randrange(len(hp))
                assert wp.cancel(hp[i]) == wc.cancel(hc[i])
            else:
                now += rng.choice([0, 1, 2, 5, 1000])
                assert wp.advance(now) == wc.advance(now)
            assert wp.next_deadline() == wc.next_deadline() and len(wp) == len(wc)


C_API = '''
from libc.stdint cimport int64_t
from kcore.timing_wheel cimport TimingWheel

def run(TimingWheel w):
    cdef int64_t nd = -1
    cdef int64_t h1 = w.add_c(15, "a"), h2 = w.add_c(7, "b"), h3 = w.add_c(900, "c")
    assert h1 > 0 and w.cancel_c(h3) and not w.cancel_c(h3) and not w.cancel_c(-5)
    assert w.next_deadline_c(&nd)
    first = nd
    out = [w.advance_c(6), w.advance_c(7), w.advance_c(20)]
    assert not w.next_deadline_c(&nd)
    try:
        w.add_c(<int64_t>1 << 62, "x")
    except OverflowError:
        out.append("overflow")
    return first, out
'''


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels only")
def test_c_api(tmp_path):
    import kcore.timing_wheel as tw
    from test_buffer_pool import compile_module

    mod = compile_module(tmp_path, "tw_capi", C_API, tw)
    assert mod.run(tw.TimingWheel(1, 20, 0)) == (7, [[], ["b"], ["a"], "overflow"])
