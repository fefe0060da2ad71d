"""Zigzag (signed) and plain unsigned base-128 varints, as in Kafka's ByteUtils."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.number cimport PyNumber_Index
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t, uint8_t

from kcore.errors import CorruptRecordError

__all__ = [
    "encode_varint", "decode_varint", "size_of_varint",
    "encode_unsigned_varint", "decode_unsigned_varint", "size_of_unsigned_varint",
]

cdef inline uint64_t _zigzag(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef Py_ssize_t uvarint_size(uint64_t value) noexcept nogil:
    cdef Py_ssize_t n = 1
    while value > 0x7f:
        value >>= 7
        n += 1
    return n


cdef Py_ssize_t write_uvarint(uint8_t* buf, uint64_t value) noexcept nogil:
    cdef Py_ssize_t i = 0
    while value > 0x7f:
        buf[i] = <uint8_t>(value | 0x80)
        value >>= 7
        i += 1
    buf[i] = <uint8_t>value
    return i + 1


cdef Py_ssize_t read_uvarint(const uint8_t* buf, Py_ssize_t n, uint64_t* out) noexcept nogil:
    cdef uint64_t result = 0
    cdef uint8_t b
    cdef Py_ssize_t i = 0
    cdef int shift = 0
    if n > 10:
        n = 10
    while i < n:
        b = buf[i]
        result |= <uint64_t>(b & 0x7f) << shift  # 10th byte: bits past 64 are dropped (as Java)
        i += 1
        if not (b & 0x80):
            out[0] = result
            return i
        shift += 7
    return -1


cdef Py_ssize_t varint_size(int64_t value) noexcept nogil:
    return uvarint_size(_zigzag(value))


cdef Py_ssize_t write_varint(uint8_t* buf, int64_t value) noexcept nogil:
    return write_uvarint(buf, _zigzag(value))


cdef Py_ssize_t read_varint(const uint8_t* buf, Py_ssize_t n, int64_t* out) noexcept nogil:
    cdef uint64_t u = 0
    cdef Py_ssize_t used = read_uvarint(buf, n, &u)
    if used > 0:
        out[0] = <int64_t>((u >> 1) ^ (0 - (u & 1)))
    return used


cdef object _read(object buf, Py_ssize_t pos, uint64_t* out):
    """Bytes consumed from buf[pos:]; raises on bad position or corrupt input."""
    cdef Py_buffer view
    cdef Py_ssize_t n, used
    if pos < 0:
        raise ValueError("pos must be >= 0, got %d" % pos)
    if type(buf) is bytes:
        n = PyBytes_GET_SIZE(buf)
        used = read_uvarint(<const uint8_t*>PyBytes_AS_STRING(buf) + pos, n - pos, out) if pos < n else -1
    else:
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        n = view.len
        used = read_uvarint(<const uint8_t*>view.buf + pos, n - pos, out) if pos < n else -1
        PyBuffer_Release(&view)
    if used < 0:
        if n - pos >= 10:
            raise CorruptRecordError("varint at offset %d is longer than 10 bytes" % pos)
        raise CorruptRecordError("truncated varint at offset %d" % pos)
    return pos + used


cdef inline object _int(object value):
    # C integer conversion would truncate floats; accept only ints and __index__ objects
    return value if type(value) is int else PyNumber_Index(value)


def encode_varint(value):
    """Zigzag varint bytes of a signed 64-bit value."""
    cdef uint8_t buf[10]
    return PyBytes_FromStringAndSize(<char*>buf, write_varint(buf, _int(value)))


def size_of_varint(value):
    """Length of encode_varint(value)."""
    return varint_size(_int(value))


def decode_varint(buf, pos=0):
    """(value, new_pos) of the zigzag varint at buf[pos] (any bytes-like)."""
    cdef uint64_t u = 0
    end = _read(buf, _int(pos), &u)
    return <int64_t>((u >> 1) ^ (0 - (u & 1))), end


def encode_unsigned_varint(value):
    """Unsigned (non-zigzag) varint bytes of a value in [0, 2**64)."""
    cdef uint8_t buf[10]
    return PyBytes_FromStringAndSize(<char*>buf, write_uvarint(buf, _int(value)))


def size_of_unsigned_varint(value):
    """Length of encode_unsigned_varint(value)."""
    return uvarint_size(_int(value))


def decode_unsigned_varint(buf, pos=0):
    """(value, new_pos) of the unsigned varint at buf[pos] (any bytes-like)."""
    cdef uint64_t u = 0
    end = _read(buf, _int(pos), &u)
    return u, end
