"""Java's Utils.murmur2 (signed 32-bit) and the default partitioner's key -> partition rule."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from libc.stdint cimport int32_t, uint32_t, uint8_t

__all__ = ["murmur2", "partition_for_key"]

cdef enum:
    SEED = 0x9747b28c
    M = 0x5bd1e995


cdef int32_t murmur2_hash(const uint8_t* data, Py_ssize_t n) noexcept nogil:
    cdef uint32_t h = <uint32_t>SEED ^ <uint32_t>n
    cdef uint32_t k
    cdef Py_ssize_t i, tail = n & ~(<Py_ssize_t>3)
    for i in range(0, tail, 4):
        k = (<uint32_t>data[i] | (<uint32_t>data[i + 1] << 8) |
             (<uint32_t>data[i + 2] << 16) | (<uint32_t>data[i + 3] << 24))
        k *= <uint32_t>M
        k ^= k >> 24
        k *= <uint32_t>M
        h = (h * <uint32_t>M) ^ k
    i = n & 3
    if i == 3:
        h ^= <uint32_t>data[tail + 2] << 16
    if i >= 2:
        h ^= <uint32_t>data[tail + 1] << 8
    if i >= 1:
        h ^= data[tail]
        h *= <uint32_t>M
    h ^= h >> 13
    h *= <uint32_t>M
    h ^= h >> 15
    return <int32_t>h


cdef int32_t partition_of(const uint8_t* key, Py_ssize_t n, int32_t num_partitions) noexcept nogil:
    return (murmur2_hash(key, n) & 0x7fffffff) % num_partitions


cdef int32_t _hash(object data) except? -1:
    cdef Py_buffer view
    cdef int32_t h
    if type(data) is bytes:
        return murmur2_hash(<const uint8_t*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    if data is None:
        raise TypeError("murmur2 needs a bytes-like key, not None")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    h = murmur2_hash(<const uint8_t*>view.buf, view.len)
    PyBuffer_Release(&view)
    return h


def murmur2(data):
    """Java Utils.murmur2 of a bytes-like object, as a signed 32-bit int."""
    return _hash(data)


def partition_for_key(key, num_partitions):
    """(murmur2(key) & 0x7fffffff) % num_partitions, as Kafka's default partitioner."""
    cdef int32_t n = num_partitions if type(num_partitions) is int else PyNumber_Index(num_partitions)
    if n <= 0:
        raise ValueError("num_partitions must be > 0, got %d" % num_partitions)
    return (_hash(key) & 0x7fffffff) % n
