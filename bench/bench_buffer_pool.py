"""BufferPool allocate+deallocate pairs/s: compiled kcore vs its pure-Python twin."""
import pytest

import kcore

IMPLS = {"c": False, "python": True} if kcore.EXTENSIONS else {"python": True}
PAIRS = 1000


def pairs(pool, size):
    allocate, deallocate = pool.allocate, pool.deallocate
    for _ in range(PAIRS):
        deallocate(allocate(size, 1000))


def run(benchmark, impl, size):
    pool = kcore.kernels(pure=IMPLS[impl]).BufferPool(32 << 20, 16384)
    benchmark(pairs, pool, size)
    assert pool.available_memory == 32 << 20
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["pairs/s"] = round(PAIRS / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="buffer_pool 1k pairs, 16 KiB slab (free list)")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_slab_pairs(benchmark, impl):
    run(benchmark, impl, 16384)


@pytest.mark.benchmark(group="buffer_pool 1k pairs, 1000 B (non-pooled)")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_odd_size_pairs(benchmark, impl):
    run(benchmark, impl, 1000)
