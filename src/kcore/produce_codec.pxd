# ProduceRequest bodies / ProduceResponse results (see produce_codec.pyx): a bounds-checked
# big-endian reader whose primitives run without the GIL.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t

cdef enum:
    RD_OK = 0
    RD_TRUNCATED = 1
    RD_MALFORMED = 2

ctypedef struct kc_reader:
    const uint8_t* buf
    Py_ssize_t pos
    Py_ssize_t end

cdef int rd_uvarint(kc_reader* r, uint32_t* out) noexcept nogil
cdef int rd_i16(kc_reader* r, int16_t* out) noexcept nogil
cdef int rd_i32(kc_reader* r, int32_t* out) noexcept nogil
cdef int rd_i64(kc_reader* r, int64_t* out) noexcept nogil
cdef int rd_skip(kc_reader* r, Py_ssize_t n) noexcept nogil
# Skip a tagged-field section.
cdef int rd_skip_tagged(kc_reader* r) noexcept nogil
