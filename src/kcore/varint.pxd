# Zigzag varints (Kafka record fields) and unsigned varints (flexible protocol versions).
# Threads: pure functions, no shared state: callable without the GIL, from any thread.
from libc.stdint cimport int64_t, uint64_t, uint8_t

# Bytes needed / written; buf must have room for 10 bytes.
cdef Py_ssize_t varint_size(int64_t value) noexcept nogil
cdef Py_ssize_t write_varint(uint8_t* buf, int64_t value) noexcept nogil
cdef Py_ssize_t uvarint_size(uint64_t value) noexcept nogil
cdef Py_ssize_t write_uvarint(uint8_t* buf, uint64_t value) noexcept nogil
# Bounds-checked reads of at most n bytes: bytes consumed, or -1 if truncated or over 10 bytes.
cdef Py_ssize_t read_varint(const uint8_t* buf, Py_ssize_t n, int64_t* out) noexcept nogil
cdef Py_ssize_t read_uvarint(const uint8_t* buf, Py_ssize_t n, uint64_t* out) noexcept nogil
