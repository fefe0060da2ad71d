# cython: binding=False
"""Kafka record batch v2 (magic 2) builder: records go straight into one C buffer."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.list cimport PyList_CheckExact, PyList_GET_SIZE
from cpython.long cimport PyLong_Check
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_SIZE
from libc.stdint cimport (INT32_MAX, int16_t, int32_t, int64_t, uint16_t, uint32_t,
                          uint64_t, uint8_t)
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memmove

from kcore.atomic_impl cimport kc_store_ssize
from kcore.crc cimport crc32c_update
from kcore.varint cimport varint_size, write_varint

import time
from operator import index

include "_compression_type.py"   # the codec registry (kcore.compression_type)
from kcore.errors import IllegalStateError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t newsize) except -1
    enum: PyBUF_READ

__all__ = ["RecordBatchBuilder", "RECORD_BATCH_HEADER_SIZE"]

RECORD_BATCH_HEADER_SIZE = RBB_HEADER_SIZE
cdef tuple _TYPES = TYPES  # kcore.compression_type's codecs, by attributes id

cdef enum:
    TRANSACTIONAL = 0x10
    MIN_CAPACITY = 256
    FIRST_CAPACITY_MAX = 1 << 20   # initial malloc is min(max_size, this); grows by doubling
    NOGIL_MIN = 32768              # CRC shorter than this: keep the GIL
    CRC_AT = 17
    ATTRS_AT = 21
    SLACK = 64                     # spare bytes kept after the records when growing
    # largest encoding of a record's varints + 10 bytes of room for write_varint
    MAX_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5 + 10


# ---- helpers (nogil) ----

cdef inline void _be16(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void _be32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void _be64(uint8_t* p, uint64_t v) noexcept nogil:
    _be32(p, <uint32_t>(v >> 32))
    _be32(p + 4, <uint32_t>v)


cdef void _write_header(RecordBatchBuilder b, uint8_t* out, Py_ssize_t total) noexcept nogil:
    """Fill the 61-byte header of a batch of total bytes at out, CRC included."""
    _be64(out, 0)                                   # baseOffset
    _be32(out + 8, <uint32_t>(total - 12))          # batchLength
    _be32(out + 12, <uint32_t>-1)                   # partitionLeaderEpoch
    out[16] = 2                                     # magic
    _be16(out + ATTRS_AT, <uint16_t>b.attrs)
    _be32(out + 23, <uint32_t>(b.count - 1))        # lastOffsetDelta
    _be64(out + 27, <uint64_t>b.base_ts)
    _be64(out + 35, <uint64_t>b.max_ts)
    _be64(out + 43, <uint64_t>b.producer_id)
    _be16(out + 51, <uint16_t>b.producer_epoch)
    _be32(out + 53, <uint32_t>b.base_sequence)
    _be32(out + 57, <uint32_t>b.count)
    _be32(out + CRC_AT, crc32c_update(0, out + ATTRS_AT, <size_t>(total - ATTRS_AT)))


cdef inline Py_ssize_t _first_capacity(RecordBatchBuilder b) noexcept nogil:
    cdef Py_ssize_t cap = b.max_size if b.max_size < FIRST_CAPACITY_MAX else FIRST_CAPACITY_MAX
    cap += SLACK
    return cap if cap > MIN_CAPACITY else MIN_CAPACITY


cdef int _grow(RecordBatchBuilder b, Py_ssize_t need) noexcept nogil:
    """Make b.buf hold at least need bytes: 0, or -1 when out of memory."""
    cdef Py_ssize_t cap = b.cap * 2
    cdef uint8_t* p
    if cap == 0:
        cap = _first_capacity(b)
    if cap < need + SLACK:
        cap = need + SLACK
    if b.owned:
        p = <uint8_t*>realloc(b.buf, <size_t>cap)
    else:
        p = <uint8_t*>malloc(<size_t>cap)
        if p != NULL and b.buf != NULL:
            memcpy(p, b.buf, <size_t>b.pos)
    if p == NULL:
        return -1
    b.buf = p
    b.cap = cap
    b.owned = True
    return 0


cdef inline uint8_t* _varint(uint8_t* p, int64_t v) noexcept nogil:
    """write_varint, inlined for the one- and two-byte values most of a record's fields are
    (checked against kcore.varint at import: _check_varints)."""
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)   # zigzag
    if z < 0x80:
        p[0] = <uint8_t>z
        return p + 1
    if z < 0x4000:
        p[0] = <uint8_t>(z | 0x80)
        p[1] = <uint8_t>(z >> 7)
        return p + 2
    return p + write_varint(p, v)


cdef inline Py_ssize_t _size_of(Py_ssize_t n) noexcept nogil:
    """varint_size of a length n >= 0, inlined below 8192."""
    return 1 if n < 64 else 2 if n < 8192 else varint_size(n)


cdef uint8_t* _fields(uint8_t* p, int64_t delta, int32_t count,
                     const uint8_t* key, Py_ssize_t klen,
                     const uint8_t* value, Py_ssize_t vlen,
                     const uint8_t* headers, Py_ssize_t hlen, int32_t hcount) noexcept nogil:
    """Write a record's body (everything after its length) at p; returns its end."""
    p[0] = 0                                        # record attributes
    p = _varint(p + 1, delta)                       # timestampDelta
    p = _varint(p, count)                           # offsetDelta
    p = _varint(p, klen)
    if klen > 0:
        memcpy(p, key, <size_t>klen)
        p += klen
    p = _varint(p, vlen)
    if vlen > 0:
        memcpy(p, value, <size_t>vlen)
        p += vlen
    p = _varint(p, hcount)
    if hlen:
        memcpy(p, headers, <size_t>hlen)
        p += hlen
    return p


cdef inline int _commit(RecordBatchBuilder b, Py_ssize_t need, int64_t ts) noexcept nogil:
    if b.count == 0:
        b.base_ts = ts
        b.max_ts = ts
    elif ts > b.max_ts:
        b.max_ts = ts
    kc_store_ssize(&b.pos, need)  # read by other threads as a hint (pxd)
    b.count += 1
    return RBB_APPENDED


cdef int _append_exact(RecordBatchBuilder b, int64_t ts,
                       const uint8_t* key, Py_ssize_t klen, const uint8_t* value, Py_ssize_t vlen,
                       const uint8_t* headers, Py_ssize_t hlen, int32_t hcount) noexcept nogil:
    """_append's slow path: errors, and near the end of the buffer exact size first, growing
    only if the record really does not fit."""
    cdef Py_ssize_t body, need
    cdef int64_t delta = 0
    cdef uint8_t* start
    if b.built:
        return RBB_BUILT
    if (b.count == INT32_MAX or klen > INT32_MAX or vlen > INT32_MAX or hlen > INT32_MAX
            or hlen < 0 or hcount < 0):
        return RBB_TOO_LARGE
    if b.count:
        delta = <int64_t>(<uint64_t>ts - <uint64_t>b.base_ts)   # wraps like Java's long
    body = (1 + varint_size(delta) + varint_size(b.count) + varint_size(klen)
            + varint_size(vlen) + varint_size(hcount) + hlen)
    body += (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
    if body > INT32_MAX:
        return RBB_TOO_LARGE
    need = b.pos + varint_size(body) + body
    if need - 12 > INT32_MAX:
        return RBB_TOO_LARGE
    if b.count and need > b.max_size:
        return RBB_FULL
    if need > b.cap and _grow(b, need) < 0:
        return RBB_NO_MEMORY
    start = b.buf + b.pos
    _fields(start + write_varint(start, body), delta, b.count, key, klen, value, vlen,
            headers, hlen, hcount)
    return _commit(b, need, ts)


cdef inline int _append(RecordBatchBuilder b, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                        const uint8_t* value, Py_ssize_t vlen,
                        const uint8_t* headers, Py_ssize_t hlen, int32_t hcount) noexcept nogil:
    cdef int32_t count = b.count
    cdef Py_ssize_t body, need, nlen, guess
    cdef uint8_t* start
    klen = klen if klen >= 0 else -1
    vlen = vlen if vlen >= 0 else -1
    if (b.built or count == INT32_MAX or klen > INT32_MAX or vlen > INT32_MAX
            or <size_t>hlen > INT32_MAX or hcount < 0
            or b.pos + hlen + klen + vlen + MAX_RECORD_OVERHEAD > b.cap):
        return _append_exact(b, ts, key, klen, value, vlen, headers, hlen, hcount)
    # Room for the largest encoding: write the body in place right away, after a length of
    # the size the previous record's had, and move it in the rare case that was wrong.
    start = b.buf + b.pos
    guess = b.nlen
    body = _fields(start + guess, <int64_t>(<uint64_t>ts - <uint64_t>b.base_ts) if count else 0,
                   count, key, klen, value, vlen, headers, hlen, hcount) - (start + guess)
    nlen = _size_of(body)
    need = b.pos + nlen + body
    if need - 12 > INT32_MAX:
        return RBB_TOO_LARGE
    if count and need > b.max_size:
        return RBB_FULL
    if nlen != guess:
        memmove(start + nlen, start + guess, <size_t>body)
        b.nlen = <int>nlen
    _varint(start, body)
    return _commit(b, need, ts)


cdef int _check_varints() except -1:
    """_varint and _size_of encode as kcore.varint does (its edge values)."""
    cdef uint8_t a[16]
    cdef uint8_t b[16]
    cdef Py_ssize_t n
    for v in (0, -1, 1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 1 << 40, -(1 << 62)):
        n = write_varint(a, v)
        if _varint(b, v) - b != n or a[:n] != b[:n]:
            raise ImportError("kcore.varint: unexpected encoding of %d" % v)
        if v >= 0 and _size_of(v) != varint_size(v):
            raise ImportError("kcore.varint: unexpected size of %d" % v)
    return 0


_check_varints()


# ---- helpers (GIL) ----

cdef int _alloc_out(RecordBatchBuilder b) except -1:
    """First buffer of a Python-driven builder: a bytes object, so that build() can shrink it
    in place and return it without a copy."""
    cdef Py_ssize_t cap = _first_capacity(b)
    o = PyBytes_FromStringAndSize(NULL, cap)
    Py_INCREF(o)
    Py_XDECREF(b.out)
    b.out = <PyObject*>o
    b.buf = <uint8_t*>PyBytes_AS_STRING(o)
    b.cap = cap
    return 0


cdef inline bint _in_out(RecordBatchBuilder b) noexcept:
    return b.out != NULL and b.buf == <uint8_t*>PyBytes_AS_STRING(<object>b.out)


cdef void _release(RecordBatchBuilder b) noexcept:
    if b.owned:
        free(b.buf)
    Py_XDECREF(b.out)
    b.out = NULL
    b.buf = NULL
    b.cap = 0
    b.owned = False
    free(b.hbuf)
    b.hbuf = NULL
    b.hcap = 0


cdef int _raise(int rc) except -1:
    if rc == RBB_NO_MEMORY:
        raise MemoryError()
    if rc == RBB_BUILT:
        raise IllegalStateError("append() after build()")
    raise ValueError("record too large for a record batch (int32 size limits)")


cdef int64_t _timestamp(object ts) except? -1:
    cdef int overflow = 0
    cdef long long v
    if ts is None:
        return <int64_t>(time.time() * 1000)
    if not PyLong_Check(ts):
        ts = index(ts)
    v = PyLong_AsLongLongAndOverflow(ts, &overflow)
    if overflow:
        raise ValueError("timestamp_ms out of int64 range: %d" % ts)
    return v


cdef int64_t _int_in(object v, str name, int bits) except? -1:
    cdef int64_t lim
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v if PyLong_Check(v) else index(v), &overflow)
    lim = (<int64_t>1) << (bits - 1) if bits < 64 else 0
    if overflow or (bits < 64 and not -lim <= x < lim):
        raise ValueError("%s out of int%d range: %d" % (name, bits, v))
    return x


cdef int _view(object obj, Py_buffer* view, str what) except -1:
    """Buffer of a non-bytes key/value/header value; the caller releases it."""
    if isinstance(obj, str):
        raise TypeError("%s must be bytes, bytearray, memoryview or None, not str" % what)
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except BufferError:
        raise TypeError("%s buffer must be C-contiguous" % what) from None
    except TypeError:
        raise TypeError("%s must be bytes, bytearray, memoryview or None, not %s"
                        % (what, type(obj).__name__)) from None
    return 0


cdef inline uint8_t* _reserve(uint8_t** buf, Py_ssize_t* cap, Py_ssize_t need) except NULL:
    cdef Py_ssize_t n
    cdef uint8_t* p
    if need > cap[0]:
        n = cap[0] * 2 if cap[0] * 2 > need else need + 64
        p = <uint8_t*>realloc(buf[0], <size_t>n)
        if p == NULL:
            raise MemoryError()
        buf[0] = p
        cap[0] = n
    return buf[0]


cdef Py_ssize_t _encode_headers(object headers, uint8_t** buf, Py_ssize_t* cap,
                                int32_t* count) except -1:
    """Encode headers into buf[0] (realloc'd as needed); returns the length."""
    cdef Py_ssize_t n = 0, klen, vlen
    cdef const char* kp
    cdef const uint8_t* vp
    cdef Py_buffer view
    cdef bint has_view
    cdef uint8_t* p
    count[0] = 0
    for pair in headers:
        hkey, hval = pair
        if not isinstance(hkey, str):
            raise TypeError("header key must be str, not %s" % type(hkey).__name__)
        kp = PyUnicode_AsUTF8AndSize(hkey, &klen)
        has_view = False
        if hval is None:
            vp, vlen = NULL, -1
        elif PyBytes_CheckExact(hval):
            vp, vlen = <const uint8_t*>PyBytes_AS_STRING(hval), PyBytes_GET_SIZE(hval)
        else:
            _view(hval, &view, "header value")
            has_view = True
            vp, vlen = <const uint8_t*>view.buf, view.len
        try:
            if count[0] == INT32_MAX or n + klen + (vlen if vlen > 0 else 0) > INT32_MAX:
                raise ValueError("headers too large")
            p = _reserve(buf, cap, n + 20 + klen + (vlen if vlen > 0 else 0)) + n
            p += write_varint(p, klen)
            memcpy(p, kp, <size_t>klen)
            p += klen
            p += write_varint(p, vlen)
            if vlen > 0:
                memcpy(p, vp, <size_t>vlen)
                p += vlen
            n = p - buf[0]
            count[0] += 1
        finally:
            if has_view:
                PyBuffer_Release(&view)
    return n


cdef bytes encode_headers(object headers, int32_t* count):
    cdef uint8_t* buf = NULL
    cdef Py_ssize_t cap = 0, n
    try:
        n = _encode_headers(headers, &buf, &cap, count)
        return PyBytes_FromStringAndSize(<char*>buf, n)
    finally:
        free(buf)


cdef inline bint _no_headers(object headers):
    if headers is None:
        return True
    if PyTuple_CheckExact(headers):
        return PyTuple_GET_SIZE(headers) == 0
    if PyList_CheckExact(headers):
        return PyList_GET_SIZE(headers) == 0
    return False


cdef object _append_any(RecordBatchBuilder self, int64_t ts, object key, object value, object headers):
    """append() for buffers other than bytes and for headers."""
    cdef Py_buffer kview, vview
    cdef bint has_k = False, has_v = False
    cdef const uint8_t* kp = NULL
    cdef const uint8_t* vp = NULL
    cdef Py_ssize_t kl = -1, vl = -1, hlen = 0, hcap = self.hcap
    cdef int32_t hcount = 0
    cdef uint8_t* hbuf = self.hbuf
    cdef int rc
    self.hbuf, self.hcap = NULL, 0   # taken while Python code (iterators) may re-enter
    try:
        if key is None:
            pass
        elif PyBytes_CheckExact(key):
            kp, kl = <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
        else:
            _view(key, &kview, "key")
            has_k = True
            kp, kl = <const uint8_t*>kview.buf, kview.len
        if value is None:
            pass
        elif PyBytes_CheckExact(value):
            vp, vl = <const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
        else:
            _view(value, &vview, "value")
            has_v = True
            vp, vl = <const uint8_t*>vview.buf, vview.len
        if headers is not None:
            hlen = _encode_headers(headers, &hbuf, &hcap, &hcount)
        rc = _append(self, ts, kp, kl, vp, vl, hbuf, hlen, hcount)
    finally:
        if self.hbuf == NULL and not self.built:
            self.hbuf, self.hcap = hbuf, hcap
        else:
            free(hbuf)
        if has_k:
            PyBuffer_Release(&kview)
        if has_v:
            PyBuffer_Release(&vview)
    if rc == RBB_APPENDED:
        return True
    if rc == RBB_FULL:
        return False
    _raise(rc)


cdef class RecordBatchBuilder:
    """Accumulates records into one v2 batch; build() returns the batch with baseOffset 0."""

    def __init__(self, max_size, compression="none", producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False):
        cdef int overflow = 0
        cdef long long size
        if self.count or self.built:
            raise IllegalStateError("RecordBatchBuilder already in use")
        size = PyLong_AsLongLongAndOverflow(
            max_size if PyLong_Check(max_size) else index(max_size), &overflow)
        if overflow > 0 or size > (<long long>1 << 62):
            size = <long long>1 << 62
        elif size < 0 or overflow < 0:
            raise ValueError("max_size must be >= 0, got %d" % max_size)
        self.codec = 0 if compression is None else for_name(compression).id
        self.max_size = <Py_ssize_t>size
        self.attrs = <int16_t>(self.codec | (TRANSACTIONAL if transactional else 0))
        self.producer_id = _int_in(producer_id, "producer_id", 64)
        self.producer_epoch = <int16_t>_int_in(producer_epoch, "producer_epoch", 16)
        self.base_sequence = <int32_t>_int_in(base_sequence, "base_sequence", 32)
        self.pos = RBB_HEADER_SIZE
        self.nlen = 1
        self.base_ts = -1
        self.max_ts = -1

    def __dealloc__(self):
        _release(self)

    def __len__(self):
        return self.count

    cdef int attach(self, uint8_t* mem, Py_ssize_t capacity) noexcept nogil:
        if self.count or self.built or capacity < RBB_HEADER_SIZE or mem == NULL:
            return -1
        if self.owned:
            free(self.buf)
        self.buf = mem
        self.cap = capacity
        self.owned = False
        return 0

    cdef int move_to(self, uint8_t* mem, Py_ssize_t capacity) noexcept nogil:
        if self.built or mem == NULL or capacity < self.pos or capacity < RBB_HEADER_SIZE:
            return -1
        if self.buf != NULL:
            memcpy(mem, self.buf, <size_t>self.pos)
        if self.owned:
            free(self.buf)
        self.buf = mem
        self.cap = capacity
        self.owned = False
        self.max_size = capacity
        return 0

    cdef int append_raw(self, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                        const uint8_t* value, Py_ssize_t vlen,
                        const uint8_t* headers, Py_ssize_t hlen, int32_t hcount) noexcept nogil:
        return _append(self, ts, key, klen, value, vlen, headers, hlen, hcount)

    cdef Py_ssize_t seal(self) noexcept nogil:
        if self.built or self.codec:
            return -1
        self.built = True
        if self.count == 0:
            return 0
        _write_header(self, self.buf, self.pos)
        return self.pos

    def size_in_bytes(self):
        """Bytes written so far, the batch header included (the uncompressed size)."""
        return self.pos

    def raise_max_size(self, Py_ssize_t max_size):
        """Let later records fill up to max_size bytes (never lowers it)."""
        if max_size > self.max_size:
            self.max_size = max_size

    def append(self, timestamp_ms, key, value, headers=()):
        """Add one record; False (builder unchanged) if it does not fit in max_size."""
        cdef int64_t ts
        cdef int rc
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp = NULL
        cdef Py_ssize_t kl = -1, vl = -1
        if self.built:
            raise IllegalStateError("append() after build()")
        ts = _timestamp(timestamp_ms)
        if self.buf == NULL:
            _alloc_out(self)
        if _no_headers(headers):
            if key is None:
                pass
            elif PyBytes_CheckExact(key):
                kp, kl = <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
            else:
                return _append_any(self, ts, key, value, None)
            if value is None:
                pass
            elif PyBytes_CheckExact(value):
                vp, vl = <const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
            else:
                return _append_any(self, ts, key, value, None)
            rc = _append(self, ts, kp, kl, vp, vl, NULL, 0, 0)
        else:
            return _append_any(self, ts, key, value, headers)
        if rc == RBB_APPENDED:
            return True
        if rc == RBB_FULL:
            return False
        _raise(rc)

    def build(self):
        """The complete batch as bytes (b"" when empty, as Java's MemoryRecords.EMPTY)."""
        cdef Py_ssize_t n
        cdef Py_buffer view
        cdef bytes out
        if self.built:
            raise IllegalStateError("build() called twice")
        try:
            if self.count == 0:
                self.built = True
                return b""
            self.built = True   # before the GIL is released: append() must not touch buf
            if self.codec == 0:
                n = self.pos
                if n >= NOGIL_MIN:
                    with nogil:
                        _write_header(self, self.buf, n)
                else:
                    _write_header(self, self.buf, n)
                if not _in_out(self):
                    return PyBytes_FromStringAndSize(<char*>self.buf, n)
                _PyBytes_Resize(&self.out, n)      # shrinks in place; frees it on failure
                out = <object>self.out
                Py_DECREF(out)
                self.out = NULL
                return out
            records = PyMemoryView_FromMemory(<char*>self.buf + RBB_HEADER_SIZE,
                                              self.pos - RBB_HEADER_SIZE, PyBUF_READ)
            try:
                packed = _TYPES[self.codec].compress(records)
            finally:
                records.release()
            PyObject_GetBuffer(packed, &view, PyBUF_SIMPLE)
            try:
                n = RBB_HEADER_SIZE + view.len
                if n - 12 > INT32_MAX:
                    raise ValueError("compressed record batch too large")
                out = PyBytes_FromStringAndSize(NULL, n)
                memcpy(PyBytes_AS_STRING(out) + RBB_HEADER_SIZE, view.buf, <size_t>view.len)
            finally:
                PyBuffer_Release(&view)
            _write_header(self, <uint8_t*>PyBytes_AS_STRING(out), n)
            return out
        finally:
            _release(self)
