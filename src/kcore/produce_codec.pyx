# cython: binding=False
"""Compiled twin of kcore/pure/produce_codec.py (see it for the contract).

The request body is framing bytes interleaved with the record batches themselves, so a request
is written with writev and no batch is copied. The response is read with the bounds-checked
primitives of produce_codec.pxd; every length is checked against the bytes left.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from kcore.errors import KafkaProtocolError

__all__ = ["encode_produce_body", "decode_produce_response"]

cdef int MIN_VERSION = 3, MAX_VERSION = 12, FLEXIBLE_FROM = 9  # v12: v11 on the wire


cdef int _check_version(int version) except -1:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError("Produce version %r is not supported (v%d..v%d)"
                         % (version, MIN_VERSION, MAX_VERSION))
    return 0


# -- reading (no GIL) ---------------------------------------------------------------------------

cdef int rd_skip(kc_reader* r, Py_ssize_t n) noexcept nogil:
    if n < 0 or n > r.end - r.pos:
        return RD_TRUNCATED
    r.pos += n
    return RD_OK


cdef int rd_uvarint(kc_reader* r, uint32_t* out) noexcept nogil:
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    while shift < 32:
        if r.pos >= r.end:
            return RD_TRUNCATED
        b = r.buf[r.pos]
        r.pos += 1
        result |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            if result >> 32:
                return RD_MALFORMED
            out[0] = <uint32_t>result
            return RD_OK
        shift += 7
    return RD_MALFORMED


cdef inline int _rd_be(kc_reader* r, int n, uint64_t* out) noexcept nogil:
    """A big-endian n-byte integer (unsigned; the callers cast)."""
    cdef uint64_t v = 0
    cdef int i
    if r.end - r.pos < n:
        return RD_TRUNCATED
    for i in range(n):
        v = (v << 8) | r.buf[r.pos + i]
    r.pos += n
    out[0] = v
    return RD_OK


cdef int rd_i16(kc_reader* r, int16_t* out) noexcept nogil:
    cdef uint64_t v = 0
    cdef int rc = _rd_be(r, 2, &v)
    out[0] = <int16_t>v
    return rc


cdef int rd_i32(kc_reader* r, int32_t* out) noexcept nogil:
    cdef uint64_t v = 0
    cdef int rc = _rd_be(r, 4, &v)
    out[0] = <int32_t>v
    return rc


cdef int rd_i64(kc_reader* r, int64_t* out) noexcept nogil:
    cdef uint64_t v = 0
    cdef int rc = _rd_be(r, 8, &v)
    out[0] = <int64_t>v
    return rc


cdef int rd_skip_tagged(kc_reader* r) noexcept nogil:
    cdef uint32_t count, tag, size, i
    cdef int rc
    if r.pos < r.end and r.buf[r.pos] == 0:  # the usual case: no tagged fields
        r.pos += 1
        return RD_OK
    rc = rd_uvarint(r, &count)
    if rc != RD_OK:
        return rc
    if <uint64_t>count * 2 > <uint64_t>(r.end - r.pos):
        return RD_TRUNCATED
    for i in range(count):
        rc = rd_uvarint(r, &tag)
        if rc == RD_OK:
            rc = rd_uvarint(r, &size)
        if rc == RD_OK:
            rc = rd_skip(r, size)
        if rc != RD_OK:
            return rc
    return RD_OK


# -- reading: Python values -----------------------------------------------------------------------

cdef int _ok(int rc, kc_reader* r, str what) except -1:
    if rc == RD_OK:
        return 0
    raise KafkaProtocolError("%s %s at offset %d of a ProduceResponse" % (
        "truncated" if rc == RD_TRUNCATED else "malformed", what, r.pos))


cdef Py_ssize_t _length(kc_reader* r, bint compact, bint short_len, bint nullable,
                        str what) except -2:
    """A string/array length; -1 for null (if nullable)."""
    cdef uint32_t u = 0
    cdef int16_t s = 0
    cdef int32_t i = 0
    cdef int64_t n
    if compact:
        _ok(rd_uvarint(r, &u), r, what + " length")
        n = <int64_t>u - 1
    elif short_len:
        _ok(rd_i16(r, &s), r, what + " length")
        n = s
    else:
        _ok(rd_i32(r, &i), r, what + " length")
        n = i
    if n < 0:
        if n == -1 and nullable:
            return -1
        raise KafkaProtocolError("%s %s length %d at offset %d of a ProduceResponse" % (
            "null" if n == -1 else "negative", what, n, r.pos))
    return <Py_ssize_t>n


cdef Py_ssize_t _array_len(kc_reader* r, bint compact) except -1:
    cdef Py_ssize_t n = _length(r, compact, False, False, "array")
    if n > r.end - r.pos:
        raise KafkaProtocolError("array of %d items cannot fit in the %d bytes left (offset %d)"
                                 % (n, r.end - r.pos, r.pos))
    return n


cdef object _string(kc_reader* r, bint compact, bint nullable):
    cdef Py_ssize_t n = _length(r, compact, True, nullable, "string")
    cdef Py_ssize_t at = r.pos
    if n < 0:
        return None
    _ok(rd_skip(r, n), r, "string")
    try:
        return PyUnicode_DecodeUTF8(<const char*>r.buf + at, n, NULL)
    except UnicodeDecodeError as e:
        raise KafkaProtocolError("string at offset %d is not UTF-8: %s" % (at, e)) from None


cdef tuple _record_errors(kc_reader* r, bint flexible):
    cdef Py_ssize_t i, n = _array_len(r, flexible)
    cdef int32_t index = 0
    if n == 0:
        return ()
    found = []
    for i in range(n):
        _ok(rd_i32(r, &index), r, "batch_index")
        found.append((index, _string(r, flexible, True)))
        if flexible:
            _ok(rd_skip_tagged(r), r, "tagged fields")
    return tuple(found)


def decode_produce_response(int version, body):
    cdef Py_buffer view
    cdef kc_reader r
    cdef bint flexible = version >= FLEXIBLE_FROM
    cdef Py_ssize_t t, p, topics, parts
    cdef int32_t partition = 0, throttle = 0
    cdef int16_t error_code = 0
    cdef int64_t base_offset = 0, append_time = 0, start_offset = 0
    _check_version(version)
    try:
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
    except BufferError:
        raise TypeError("a ProduceResponse must be a bytes-like object, not %s"
                        % type(body).__name__) from None
    try:
        r.buf, r.pos, r.end = <const uint8_t*>view.buf, 0, view.len
        results = []
        topics = _array_len(&r, flexible)
        for t in range(topics):
            topic = _string(&r, flexible, False)
            parts = _array_len(&r, flexible)
            for p in range(parts):
                _ok(rd_i32(&r, &partition), &r, "partition index")
                _ok(rd_i16(&r, &error_code), &r, "error_code")
                _ok(rd_i64(&r, &base_offset), &r, "base_offset")
                _ok(rd_i64(&r, &append_time), &r, "log_append_time_ms")
                start_offset = -1
                if version >= 5:
                    _ok(rd_i64(&r, &start_offset), &r, "log_start_offset")
                record_errors, message = (), None
                if version >= 8:
                    record_errors = _record_errors(&r, flexible)
                    message = _string(&r, flexible, True)
                if flexible:
                    _ok(rd_skip_tagged(&r), &r, "tagged fields")
                results.append((topic, partition, error_code, base_offset, append_time,
                                start_offset, message, record_errors))
            if flexible:
                _ok(rd_skip_tagged(&r), &r, "tagged fields")
        _ok(rd_i32(&r, &throttle), &r, "throttle_time_ms")
        if flexible:
            _ok(rd_skip_tagged(&r), &r, "tagged fields")
        return results, throttle
    finally:
        PyBuffer_Release(&view)


# -- writing ----------------------------------------------------------------------------------

cdef class _Framing:
    """The bytes between two batches, built in a growable C buffer."""
    cdef uint8_t* buf
    cdef Py_ssize_t len, cap

    def __dealloc__(self):
        free(self.buf)

    cdef uint8_t* room(self, Py_ssize_t n) except NULL:
        cdef Py_ssize_t cap
        cdef uint8_t* grown
        if self.len + n > self.cap:
            cap = max(64, 2 * self.cap, self.len + n)
            grown = <uint8_t*>realloc(self.buf, cap)
            if grown == NULL:
                raise MemoryError()
            self.buf, self.cap = grown, cap
        return self.buf + self.len

    cdef int be(self, uint64_t v, int n) except -1:
        cdef uint8_t* p = self.room(n)
        cdef int i
        for i in range(n):
            p[i] = <uint8_t>(v >> (8 * (n - 1 - i)))
        self.len += n
        return 0

    cdef int uvarint(self, uint32_t v) except -1:
        cdef uint8_t* p = self.room(5)
        cdef int n = 0
        while v >= 0x80:
            p[n] = <uint8_t>(v | 0x80)
            v >>= 7
            n += 1
        p[n] = <uint8_t>v
        self.len += n + 1
        return 0

    cdef int length(self, Py_ssize_t n, bint compact, int width) except -1:
        """n >= -1 (-1: null): uvarint(n + 1) if compact, else a width-byte signed int."""
        if compact:
            return self.uvarint(<uint32_t>(n + 1))
        return self.be(<uint64_t><int64_t>n, width)

    cdef int string(self, s, bint compact) except -1:
        if s is None:
            return self.length(-1, compact, 2)
        if not isinstance(s, str):
            raise TypeError("string field must be str, got %s" % type(s).__name__)
        cdef bytes b = (<str>s).encode("utf-8")
        if len(b) > 32767:
            raise ValueError("string of %d bytes is too long (max 32767)" % len(b))
        self.length(len(b), compact, 2)
        memcpy(self.room(len(b)), <const char*>b, len(b))
        self.len += len(b)
        return 0

    cdef bytes take(self):
        cdef bytes b = PyBytes_FromStringAndSize(<const char*>self.buf, self.len)
        self.len = 0
        return b


cdef Py_ssize_t _size(payload) except -1:
    cdef Py_buffer view
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    cdef Py_ssize_t n = view.len
    PyBuffer_Release(&view)
    return n


def encode_produce_body(int version, int acks, int32_t timeout_ms, transactional_id, batches):
    cdef bint flexible = version >= FLEXIBLE_FROM
    cdef _Framing w = _Framing()
    cdef int32_t partition
    _check_version(version)
    if acks not in (-1, 0, 1):
        raise ValueError("acks must be -1 (all), 0 or 1, got %r" % (acks,))
    topics = {}
    for topic, partition, payload in batches:
        parts = topics.get(topic)
        if parts is None:
            parts = topics[topic] = []
        parts.append((partition, payload))
    w.string(transactional_id, flexible)
    w.be(<uint16_t>acks, 2)
    w.be(<uint32_t>timeout_ms, 4)
    w.length(len(topics), flexible, 4)
    out = []
    for topic, parts in topics.items():
        w.string(topic, flexible)
        w.length(len(parts), flexible, 4)
        for partition, payload in parts:
            w.be(<uint32_t>partition, 4)
            if payload is None:
                w.length(-1, flexible, 4)
            else:
                w.length(_size(payload), flexible, 4)
                out.append(w.take())
                out.append(payload)
            if flexible:
                w.uvarint(0)
        if flexible:
            w.uvarint(0)
    if flexible:
        w.uvarint(0)
    out.append(w.take())
    return out
