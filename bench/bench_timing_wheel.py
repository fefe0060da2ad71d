"""TimingWheel throughput: compiled kcore vs its pure-Python twin.

add+advance: 10k adds with deadlines spread over 1 s, then advance in 1 ms steps to fire all.
add+cancel: 10k adds then cancel them all (most producer timeouts are cancelled).
"""
import random

import pytest

import kcore

IMPLS = {"c": False, "python": True} if kcore.EXTENSIONS else {"python": True}
N = 10_000
_rng = random.Random(4)
DEADLINES = [_rng.randrange(1, 1001) for _ in range(N)]


def add_advance(cls):
    w = cls(1, 20, 0)
    add = w.add
    for d in DEADLINES:
        add(d, d)
    fired = 0
    advance = w.advance
    for now in range(1, 1001):
        fired += len(advance(now))
    assert fired == N


def add_cancel(cls):
    w = cls(1, 20, 0)
    add, cancel = w.add, w.cancel
    handles = [add(d, d) for d in DEADLINES]
    for h in handles:
        cancel(h)
    assert len(w) == 0


def run(benchmark, impl, fn):
    benchmark(fn, kcore.kernels(pure=IMPLS[impl]).TimingWheel)
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["items/s"] = round(N / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="timing_wheel 10k adds over 1 s + 1000 x 1 ms advances")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_add_advance(benchmark, impl):
    run(benchmark, impl, add_advance)


@pytest.mark.benchmark(group="timing_wheel 10k add + cancel")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_add_cancel(benchmark, impl):
    run(benchmark, impl, add_cancel)
