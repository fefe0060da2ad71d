# cython: binding=False
"""send_batch's numpy and pandas columns (compiled; the pure twin is kcore/pure/numpy_columns.py):
_numpy_columns.py, compiled in here as the pure twin imports it, unwraps pandas, checks
dtypes, makes each array native-endian and C-contiguous (_np_column) and reads the records
through ``tolist()`` (_np_binary_rows, _np_int_rows: prepare_rows' lists, on both twins). The
readers below (np_fixed, np_binary, np_ints, cimported by kcore.batch_columns) read ``S`` and
``U`` values and keys, integer partitions, integer and ``datetime64`` timestamps from the
array's buffer instead, with no Python object per record.

``S``: read in place (np_fixed: the array's buffer; the walk drops each record's trailing
NULs, batch_columns.pxd: next_record). ``U`` (UCS4): encoded to UTF-8 into one bytes object
(two passes: sizes, then bytes); a surrogate or a code point over U+10FFFF is a ValueError, as
the pure twin's. Integers of any width and sign are
checked against the column's limit before scaling, as Arrow's (batch_columns.pyx: _scale).
Threads: see numpy_columns.pxd.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport (INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t)
from libc.stdlib cimport free, malloc

include "_numpy_columns.py"  # _np_column, _NpColumn, the tolist() readers

__all__ = []  # internal: kcore.batch_columns'

cdef uint8_t _nothing[1]


# ---- S and U (nogil) ----

cdef inline int _utf8_len(uint32_t cp) noexcept nogil:
    """The UTF-8 size of a code point; 0 if it has none (a surrogate, over U+10FFFF)."""
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 0 if 0xD800 <= cp <= 0xDFFF else 3
    return 4 if cp <= 0x10FFFF else 0


cdef Py_ssize_t _ucs4_sizes(const uint32_t* cps, Py_ssize_t w, Py_ssize_t n, Py_ssize_t* lens,
                            Py_ssize_t* total) noexcept nogil:
    """U<w>: lens[j] = record j's UTF-8 size (trailing NULs dropped), total their sum; the
    flat index (j * w + k) of the first code point with no UTF-8, or -1."""
    cdef Py_ssize_t j, k, m, size, t = 0
    cdef const uint32_t* p
    cdef int c
    for j in range(n):
        p = cps + j * w
        m = w
        while m > 0 and p[m - 1] == 0:
            m -= 1
        size = 0
        for k in range(m):
            c = _utf8_len(p[k])
            if c == 0:
                return j * w + k
            size += c
        lens[j] = size
        t += size
    total[0] = t
    return -1


cdef void _ucs4_encode(const uint32_t* cps, Py_ssize_t w, Py_ssize_t n, uint8_t* out,
                       const uint8_t** ptrs, const Py_ssize_t* lens) noexcept nogil:
    """U<w> as UTF-8 at out (sizes checked by _ucs4_sizes); ptrs[j] = record j's."""
    cdef Py_ssize_t j, k
    cdef const uint32_t* p
    cdef uint32_t cp
    cdef uint8_t* end
    for j in range(n):
        p = cps + j * w
        ptrs[j] = out
        end = out + lens[j]
        k = 0
        while out < end:
            cp = p[k]
            k += 1
            if cp < 0x80:
                out[0] = <uint8_t>cp
                out += 1
            elif cp < 0x800:
                out[0] = <uint8_t>(0xC0 | (cp >> 6))
                out[1] = <uint8_t>(0x80 | (cp & 0x3F))
                out += 2
            elif cp < 0x10000:
                out[0] = <uint8_t>(0xE0 | (cp >> 12))
                out[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
                out[2] = <uint8_t>(0x80 | (cp & 0x3F))
                out += 3
            else:
                out[0] = <uint8_t>(0xF0 | (cp >> 18))
                out[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
                out[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
                out[3] = <uint8_t>(0x80 | (cp & 0x3F))
                out += 4


cdef object np_fixed(object col, Py_ssize_t n, str name, const uint8_t** data):
    """The column's buffer (n records of its itemsize) at data[0]; the memoryview holding it
    (numpy will not resize or free it meanwhile)."""
    cdef Py_buffer view
    cdef Py_ssize_t w = col.arr.dtype.itemsize
    held = memoryview(col.arr)
    PyObject_GetBuffer(held, &view, PyBUF_SIMPLE)
    try:
        if view.len != n * w:
            raise ValueError("%s: the numpy array holds %d bytes, %d expected"
                             % (name, view.len, n * w))
        data[0] = <const uint8_t*>view.buf if w and n else _nothing
    finally:
        PyBuffer_Release(&view)  # the memoryview still holds the export
    return held


cdef object np_binary(object col, const uint8_t** ptrs, Py_ssize_t* lens, Py_ssize_t n,
                      str name):
    cdef Py_ssize_t w = col.arr.dtype.itemsize // 4, total = 0, bad
    cdef const uint8_t* data
    cdef uint8_t* dest
    cdef bytes out
    held = np_fixed(col, n, name, &data)  # kept alive until encoded
    with nogil:
        bad = _ucs4_sizes(<const uint32_t*>data, w, n, lens, &total)
    if bad >= 0:
        raise ValueError("%s[%d]: code point U+%04X cannot be encoded as UTF-8"
                         % (name, bad // w, (<const uint32_t*>data)[bad]))
    out = PyBytes_FromStringAndSize(NULL, total)
    dest = <uint8_t*>PyBytes_AS_STRING(out)
    with nogil:
        _ucs4_encode(<const uint32_t*>data, w, n, dest, ptrs, lens)
    return out


# ---- integers (nogil) ----

cdef inline bint _load(const char* data, int size, bint signed, Py_ssize_t j,
                       int64_t* s, uint64_t* u) noexcept nogil:
    """Element j of a native integer array: s (signed) or u (unsigned); True if signed."""
    if signed:
        if size == 8:
            s[0] = (<const int64_t*>data)[j]
        elif size == 4:
            s[0] = (<const int32_t*>data)[j]
        elif size == 2:
            s[0] = (<const int16_t*>data)[j]
        else:
            s[0] = (<const int8_t*>data)[j]
        return True
    if size == 8:
        u[0] = (<const uint64_t*>data)[j]
    elif size == 4:
        u[0] = (<const uint32_t*>data)[j]
    elif size == 2:
        u[0] = (<const uint16_t*>data)[j]
    else:
        u[0] = (<const uint8_t*>data)[j]
    return False


cdef Py_ssize_t _ints(const char* data, int size, bint signed, const uint8_t* mask, bint nat,
                      Py_ssize_t n, int64_t mul, int64_t div, uint64_t limit, int64_t* out,
                      int64_t* top) noexcept nogil:
    """out[j] = element j * mul // div (-1: masked or NaT); the index of the first outside
    0..limit (as given), or -1."""
    cdef Py_ssize_t j
    cdef int64_t s = 0
    cdef uint64_t u = 0
    for j in range(n):
        if mask != NULL and mask[j]:
            out[j] = -1
            continue
        if _load(data, size, signed, j, &s, &u):
            if nat and s == INT64_MIN:
                out[j] = -1
                continue
            if s < 0:
                return j
            u = <uint64_t>s
        if u > limit:
            return j
        out[j] = <int64_t>u * mul // div
        if out[j] > top[0]:
            top[0] = out[j]
    return -1


cdef int64_t* np_ints(object col, Py_ssize_t n, str name, int64_t limit,
                      int64_t* top) except NULL:
    cdef Py_buffer view, mview
    cdef int64_t* out
    cdef const uint8_t* mask = NULL
    cdef Py_ssize_t bad
    cdef int size
    cdef bint signed = col.kind == "i", nat = col.nat, masked = False
    cdef int64_t mul = col.mul, div = col.div
    arr, mk = col.arr, col.mask
    size = arr.dtype.itemsize
    if size not in (1, 2, 4, 8):
        raise TypeError("%s: a numpy array of dtype %s is not supported" % (name, arr.dtype))
    out = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    if out == NULL:
        raise MemoryError()
    PyObject_GetBuffer(arr, &view, PyBUF_SIMPLE)
    try:
        if view.len != n * size:
            raise ValueError("%s: the numpy array holds %d bytes, %d expected"
                             % (name, view.len, n * size))
        if mk is not None:
            PyObject_GetBuffer(mk, &mview, PyBUF_SIMPLE)
            masked = True
            if mview.len != n:
                raise ValueError("%s: the mask holds %d entries, %d expected"
                                 % (name, mview.len, n))
            mask = <const uint8_t*>mview.buf
        with nogil:
            bad = _ints(<const char*>view.buf, size, signed, mask, nat, n, mul, div,
                        <uint64_t>limit, out, top)
        if bad >= 0:
            raise ValueError("%s[%d] is out of range: %d" % (name, bad, int(arr[bad])))
    except BaseException:
        free(out)
        raise
    finally:
        PyBuffer_Release(&view)
        if masked:
            PyBuffer_Release(&mview)
    return out
