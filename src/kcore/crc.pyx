"""CRC32C (Castagnoli) over any bytes-like object; hardware CRC instructions when available."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.number cimport PyNumber_Index
from libc.stdint cimport uint32_t, uint8_t

cdef extern from "crc32c_impl.h" nogil:
    void kcore_crc32c_init()
    uint32_t kcore_crc32c(uint32_t crc, const uint8_t* p, size_t n)
    uint32_t kcore_crc32c_table(uint32_t crc, const uint8_t* p, size_t n)
    const char* kcore_crc32c_name

__all__ = ["crc32c", "crc32c_backend"]

kcore_crc32c_init()

cdef enum:
    NOGIL_MIN = 32768  # below this, releasing the GIL costs more than it frees


cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* data, size_t n) noexcept nogil:
    return kcore_crc32c(crc, data, n)


def crc32c(data, crc=0):
    """CRC32C of data (bytes-like), continuing from a previous result crc (0 to start)."""
    cdef Py_buffer view
    cdef uint32_t c = crc if type(crc) is int else PyNumber_Index(crc)  # no float truncation
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= NOGIL_MIN:
            with nogil:
                c = kcore_crc32c(c, <const uint8_t*>view.buf, <size_t>view.len)
        else:
            c = kcore_crc32c(c, <const uint8_t*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def crc32c_backend():
    """Which implementation crc32c uses: "sse4.2", "armv8" or "table"."""
    return kcore_crc32c_name.decode()


def _crc32c_table(data, uint32_t crc=0):
    """Private: the portable slicing-by-8 path, for tests."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        crc = kcore_crc32c_table(crc, <const uint8_t*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return crc
