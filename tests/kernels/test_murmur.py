import random

import pytest

try:
    from kafka.partitioner.default import murmur2 as kafka_murmur2
except ImportError:  # older kafka-python layouts
    from kafka.partitioner import murmur2 as kafka_murmur2

VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"abc", 479470107),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
]


@pytest.mark.parametrize("key,expected", VECTORS)
def test_java_vectors(k, key, expected):
    for buf in (key, bytearray(key), memoryview(key)):
        assert k.murmur2(buf) == expected


def random_keys(n, seed):
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice((rng.randrange(0, 9), rng.randrange(0, 80)))) for _ in range(n)]


def test_partitions_match_kafka_python(k):
    keys = random_keys(100_000, seed=7)
    counts = (1, 3, 7, 12, 100, 2 ** 31 - 1)
    for key in keys:
        theirs = kafka_murmur2(key)
        ours = k.murmur2(key)
        assert -(2 ** 31) <= ours < 2 ** 31
        assert ours & 0xFFFFFFFF == theirs
        for n in counts:
            assert k.partition_for_key(key, n) == (theirs & 0x7FFFFFFF) % n


def test_impls_identical(both):
    py, c = both
    for key in random_keys(5000, seed=8):
        assert py.murmur2(key) == c.murmur2(key)
        assert py.partition_for_key(key, 17) == c.partition_for_key(key, 17)


def test_slices_and_empty(k):
    data = bytes(range(256)) * 2
    for off in range(8):
        for n in (0, 1, 2, 3, 4, 5, 15, 16, 17, 100):
            view = memoryview(data)[off:off + n]
            assert k.murmur2(view) == k.murmur2(bytes(view))
    assert k.murmur2(b"") == 275646681


def test_bad_arguments(k):
    for n in (0, -1, -(2 ** 31)):
        with pytest.raises(ValueError):
            k.partition_for_key(b"key", n)
    with pytest.raises(OverflowError):
        k.partition_for_key(b"key", 2 ** 31)
    for fn in (k.murmur2, lambda key: k.partition_for_key(key, 3)):
        for bad in (None, "key", 12):
            with pytest.raises(TypeError):
                fn(bad)
    with pytest.raises(TypeError):
        k.partition_for_key(b"key", 3.0)
