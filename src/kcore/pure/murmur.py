"""Pure-Python twin of kcore.murmur: Java's Utils.murmur2 and the key -> partition rule."""
from operator import index
from struct import unpack_from

__all__ = ["murmur2", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def _as_bytes(data):
    if isinstance(data, (bytes, bytearray)):
        return data
    if data is None:
        raise TypeError("murmur2 needs a bytes-like key, not None")
    view = memoryview(data)
    if not view.c_contiguous:
        raise BufferError("buffer is not C-contiguous")
    return view.cast("B")


def murmur2(data):
    """Java Utils.murmur2 of a bytes-like object, as a signed 32-bit int."""
    data = _as_bytes(data)
    n = len(data)
    h = 0x9747B28C ^ n
    tail = n & ~3
    for k in unpack_from("<%dI" % (n >> 2), data) if tail else ():
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = n & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key, num_partitions):
    """(murmur2(key) & 0x7fffffff) % num_partitions, as Kafka's default partitioner."""
    num_partitions = index(num_partitions)
    if not -0x80000000 <= num_partitions <= 0x7FFFFFFF:
        raise OverflowError("num_partitions out of int32 range: %d" % num_partitions)
    if num_partitions <= 0:
        raise ValueError("num_partitions must be > 0, got %d" % num_partitions)
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
