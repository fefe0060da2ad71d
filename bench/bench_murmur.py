"""murmur2 key hashing rate: kcore vs kafka-python's pure-Python murmur2, keys/s in extra_info."""
import random

import pytest

import kcore

try:
    from kafka.partitioner.default import murmur2 as kafka_murmur2
except ImportError:  # older kafka-python layouts
    from kafka.partitioner import murmur2 as kafka_murmur2

_rng = random.Random(16)
KEYS = [_rng.randbytes(16) for _ in range(10_000)]
IMPLS = {"kcore": kcore.kernels().murmur2, "kafka-python": kafka_murmur2}


def hash_all(fn):
    for key in KEYS:
        fn(key)


@pytest.mark.benchmark(group="murmur2 10k x 16-byte keys")
@pytest.mark.parametrize("impl", list(IMPLS))
def test_murmur2_keys(benchmark, impl):
    benchmark(hash_all, IMPLS[impl])
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["keys/s"] = round(len(KEYS) / benchmark.stats.stats.median)
