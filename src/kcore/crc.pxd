# CRC32C (Castagnoli). crc is a previous result (0 to start), as in crc32c.crc32c(data, crc).
# Threads: no shared state: callable without the GIL, from any thread (its tables are built once,
# when kcore.crc is imported, and only read after).
from libc.stdint cimport uint32_t, uint8_t

cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* data, size_t n) noexcept nogil
