"""Pure-Python twin of kcore.varint: zigzag and unsigned base-128 varints."""
from operator import index
from sys import maxsize

from kcore.errors import CorruptRecordError

__all__ = [
    "encode_varint", "decode_varint", "size_of_varint",
    "encode_unsigned_varint", "decode_unsigned_varint", "size_of_unsigned_varint",
]

_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


def _signed(value):
    value = index(value)
    if not _I64_MIN <= value <= _I64_MAX:
        raise OverflowError("value out of int64 range: %d" % value)
    return ((value << 1) ^ (value >> 63)) & _U64_MAX


def _unsigned(value):
    value = index(value)
    if not 0 <= value <= _U64_MAX:
        raise OverflowError("value out of uint64 range: %d" % value)
    return value


def _encode(u):
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _size(u):
    return max(1, (u.bit_length() + 6) // 7)


def _read(buf, pos):
    """(unsigned value, new_pos) of the varint at buf[pos]."""
    pos = index(pos)
    if pos < 0:
        raise ValueError("pos must be >= 0, got %d" % pos)
    if pos > maxsize:
        raise OverflowError("pos too large: %d" % pos)
    if not isinstance(buf, (bytes, bytearray)):
        buf = memoryview(buf)
        if not buf.c_contiguous:
            raise BufferError("buffer is not C-contiguous")
        buf = buf.cast("B")
    n = len(buf)
    result = shift = 0
    for i in range(pos, min(n, pos + 10)):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _U64_MAX, i + 1
        shift += 7
    if n - pos >= 10:
        raise CorruptRecordError("varint at offset %d is longer than 10 bytes" % pos)
    raise CorruptRecordError("truncated varint at offset %d" % pos)


def encode_varint(value):
    """Zigzag varint bytes of a signed 64-bit value."""
    return _encode(_signed(value))


def size_of_varint(value):
    """Length of encode_varint(value)."""
    return _size(_signed(value))


def decode_varint(buf, pos=0):
    """(value, new_pos) of the zigzag varint at buf[pos] (any bytes-like)."""
    u, pos = _read(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


def encode_unsigned_varint(value):
    """Unsigned (non-zigzag) varint bytes of a value in [0, 2**64)."""
    return _encode(_unsigned(value))


def size_of_unsigned_varint(value):
    """Length of encode_unsigned_varint(value)."""
    return _size(_unsigned(value))


def decode_unsigned_varint(buf, pos=0):
    """(value, new_pos) of the unsigned varint at buf[pos] (any bytes-like)."""
    return _read(buf, pos)
