import random

import pytest

from pyprod.errors import CorruptRecordError

kafka_util = pytest.importorskip("kafka.record.util")

I64_MIN, I64_MAX, U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1

SIGNED = [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2, "04"),
    (-64, "7f"), (63, "7e"), (64, "8001"), (-65, "8101"), (300, "d804"),
    (8191, "fe7f"), (-8193, "818001"), (2 ** 31 - 1, "feffffff0f"), (-2 ** 31, "ffffffff0f"),
    (I64_MAX, "feffffffffffffffff01"), (I64_MIN, "ffffffffffffffffff01"),
]
UNSIGNED = [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"),
    (2 ** 32 - 1, "ffffffff0f"), (I64_MAX, "ffffffffffffffff7f"), (U64_MAX, "ffffffffffffffffff01"),
]


def random_values(rng, n, signed=True):
    out = []
    for _ in range(n):
        bits = rng.randrange(1, 65)
        v = rng.getrandbits(bits)
        if signed:
            v -= 1 << (bits - 1)
        out.append(v)
    return out


def kafka_encode(value):
    out = bytearray()
    kafka_util.encode_varint(value, out.append)
    return bytes(out)


@pytest.mark.parametrize("value,hexed", SIGNED)
def test_signed_vectors(k, value, hexed):
    data = bytes.fromhex(hexed)
    assert k.encode_varint(value) == data
    assert k.size_of_varint(value) == len(data)
    assert k.decode_varint(data) == (value, len(data))


@pytest.mark.parametrize("value,hexed", UNSIGNED)
def test_unsigned_vectors(k, value, hexed):
    data = bytes.fromhex(hexed)
    assert k.encode_unsigned_varint(value) == data
    assert k.size_of_unsigned_varint(value) == len(data)
    assert k.decode_unsigned_varint(data) == (value, len(data))


def test_round_trip_random(k):
    rng = random.Random(1)
    for v in random_values(rng, 20000) + [I64_MIN, I64_MAX]:
        data = k.encode_varint(v)
        assert len(data) == k.size_of_varint(v)
        assert k.decode_varint(data) == (v, len(data))
    for v in random_values(rng, 20000, signed=False) + [U64_MAX]:
        data = k.encode_unsigned_varint(v)
        assert len(data) == k.size_of_unsigned_varint(v)
        assert k.decode_unsigned_varint(data) == (v, len(data))


def test_same_bytes_as_kafka_python(k):
    rng = random.Random(2)
    for v in random_values(rng, 20000) + [v for v, _ in SIGNED]:
        data = k.encode_varint(v)
        assert data == kafka_encode(v)
        assert k.size_of_varint(v) == kafka_util.size_of_varint(v)
        assert kafka_util.decode_varint(bytearray(data)) == (v, len(data))


def test_impls_identical(both):
    py, c = both
    rng = random.Random(3)
    for v in random_values(rng, 5000):
        assert py.encode_varint(v) == c.encode_varint(v)
        u = v & U64_MAX
        assert py.encode_unsigned_varint(u) == c.encode_unsigned_varint(u)


def test_decode_sequence_any_buffer(k):
    values = [0, -1, 300, I64_MIN, 5, I64_MAX, -12345678]
    blob = b"\xee" + b"".join(k.encode_varint(v) for v in values)
    for buf in (blob, bytearray(blob), memoryview(blob), memoryview(b"xx" + blob)[2:]):
        pos, got = 1, []
        while pos < len(buf):
            v, pos = k.decode_varint(buf, pos)
            got.append(v)
        assert got == values


def test_tenth_byte_high_bits_dropped(both):
    # Java's readVarlong keeps only bit 0 of a 10th byte; both impls must agree.
    data = b"\xff" * 9 + b"\x7f"
    py, c = both
    assert py.decode_unsigned_varint(data) == c.decode_unsigned_varint(data) == (U64_MAX, 10)
    assert py.decode_varint(data) == c.decode_varint(data) == (I64_MIN, 10)


@pytest.mark.parametrize("data,pos", [
    (b"", 0), (b"\x80", 0), (b"\xff\xff", 0), (b"\x01\x80", 1), (b"\x01", 1), (b"\x01", 5),
    (b"\x80" * 10, 0), (b"\x80" * 10 + b"\x01", 0), (b"\xff" * 20, 3),
])
def test_corrupt_input(k, data, pos):
    for buf in (data, bytearray(data), memoryview(data)):
        with pytest.raises(CorruptRecordError):
            k.decode_varint(buf, pos)
        with pytest.raises(CorruptRecordError):
            k.decode_unsigned_varint(buf, pos)


def test_bad_arguments(k):
    for bad in (I64_MAX + 1, I64_MIN - 1, 1 << 100):
        with pytest.raises(OverflowError):
            k.encode_varint(bad)
        with pytest.raises(OverflowError):
            k.size_of_varint(bad)
    for bad in (-1, U64_MAX + 1):
        with pytest.raises(OverflowError):
            k.encode_unsigned_varint(bad)
        with pytest.raises(OverflowError):
            k.size_of_unsigned_varint(bad)
    for bad in (1.5, "1", None):
        with pytest.raises(TypeError):
            k.encode_varint(bad)
        with pytest.raises(TypeError):
            k.encode_unsigned_varint(bad)
    with pytest.raises(ValueError):
        k.decode_varint(b"\x00", -1)
    with pytest.raises(TypeError):
        k.decode_varint("00")
    with pytest.raises(TypeError):
        k.decode_varint(None)
    with pytest.raises(TypeError):
        k.decode_varint(b"\x00", 0.0)
