# CRC32C (Castagnoli). crc is a previous result (0 to start), as in crc32c.crc32c(data, crc).
from libc.stdint cimport uint32_t, uint8_t

cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* data, size_t n) noexcept nogil
