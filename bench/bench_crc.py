"""CRC32C throughput: kcore vs the `crc32c` package (the peer), GB/s in extra_info."""
import random

import crc32c
import pytest

import kcore

IMPLS = {"kcore": kcore.kernels().crc32c, "crc32c-pkg": crc32c.crc32c}
SIZES = {"1MiB": 1 << 20, "16KiB": 16 << 10}


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("size", list(SIZES))
def test_crc32c_throughput(benchmark, size, impl):
    n = SIZES[size]
    data = random.Random(n).randbytes(n)
    fn = IMPLS[impl]
    benchmark.group = "crc32c " + size
    assert benchmark(fn, data) == crc32c.crc32c(data)
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["GB/s"] = round(n / benchmark.stats.stats.median / 1e9, 2)
