# cython: binding=False, wraparound=True
"""send_batch's columns (compiled; the pure twin, kcore/pure/batch_columns.py, reads them with
prepare_rows): values and keys, headers, partitions and timestamps, read into the Columns that
kcore.batch_send's GIL-free walk goes through record by record (next_record, batch_columns.pxd).

Arrow columns are read from their buffers (validity bitmap, int32/int64 offsets, data, from the
array's offset, chunk after chunk), checked before the walk reads them; Python sequences become
a pointer and a length per record (through the shared checks, _binary_rows), and so do numpy
U arrays (encoded); numpy S arrays are read in place, and numpy integer and datetime64 columns
from their buffers (kcore.numpy_columns: np_fixed, np_binary, np_ints). Headers are
encoded as the record format wants them, once per call. No Python object is made per record of
an Arrow column or a fixed-width numpy one. batch_send cimports read_columns (C to C) and imports check_columns and
prepare_rows from here.
Threads: see batch_columns.pxd.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

from kcore.numpy_columns cimport np_binary, np_fixed, np_ints
from kcore.record_batch_builder cimport encode_headers
from kcore.varint cimport write_varint

from kcore.numpy_columns import _np_binary_rows, _np_column, _np_int_rows, _NpColumn
include "_batch_columns.py"  # the input checks (_arrow, _binary_rows, ...), compiled in here

__all__ = []  # internal: kcore.batch_send's (it re-exports prepare_rows)

cdef uint8_t _empty[1]


# ---- reading columns (nogil) ----

cdef inline bint _bit(const uint8_t* bits, Py_ssize_t i) noexcept nogil:
    return bits == NULL or (bits[i >> 3] >> (i & 7)) & 1


cdef inline int64_t _offset(const int32_t* o32, const int64_t* o64, Py_ssize_t i) noexcept nogil:
    return o32[i] if o32 != NULL else o64[i]


cdef int _check_offsets(const int32_t* o32, const int64_t* o64, Py_ssize_t n,
                        Py_ssize_t data_size) noexcept nogil:
    """0 if offsets[0..n] rise from >= 0 to <= data_size, else -1."""
    cdef Py_ssize_t j
    cdef int64_t prev = _offset(o32, o64, 0), cur
    if prev < 0:
        return -1
    for j in range(1, n + 1):
        cur = _offset(o32, o64, j)
        if cur < prev:
            return -1
        prev = cur
    return 0 if prev <= data_size else -1


# ---- Arrow buffers (GIL) ----

cdef const uint8_t* _addr(object buf, Py_ssize_t need, str what) except? NULL:
    """The address of a pyarrow Buffer holding at least need bytes (NULL if buf is None and
    nothing is needed)."""
    if buf is None:
        if need > 0:
            raise ValueError("%s: a buffer is missing" % what)
        return NULL
    if buf.size < need:
        raise ValueError("%s: a buffer holds %d bytes, %d needed" % (what, buf.size, need))
    if not buf.is_cpu:
        raise ValueError("%s: only CPU memory can be read" % what)
    return <const uint8_t*><uintptr_t>buf.address


cdef object _chunks(object arr):
    return arr.chunks if hasattr(arr, "chunks") else [arr]


cdef int _arrow_binary(object pa, object chunk, BinChunk* out, str name) except -1:
    """out = the Arrow buffers of one binary/string chunk (type already checked)."""
    cdef Py_ssize_t n = len(chunk), off = chunk.offset, width
    cdef const uint8_t* offs
    t = chunk.type
    width = 8 if pa.types.is_large_binary(t) or pa.types.is_large_string(t) else 4
    bufs = chunk.buffers()
    out.length = n
    out.voff = off
    out.valid = _addr(bufs[0], (off + n + 7) >> 3, name) if chunk.null_count else NULL
    offs = _addr(bufs[1], (off + n + 1) * width if n else 0, name)
    if n == 0:
        return 0
    if width == 4:
        out.off32 = <const int32_t*>offs + off
    else:
        out.off64 = <const int64_t*>offs + off
    data = bufs[2]
    out.data = _addr(data, 0, name) if data is not None and data.size else _empty
    if _check_offsets(out.off32, out.off64, n, data.size if data is not None else 0) < 0:
        raise ValueError("%s: offsets outside the data buffer" % name)
    return 0


cdef inline bint _point(PyObject* item, const uint8_t** p, Py_ssize_t* n) noexcept:
    """p, n = an exact bytes item's data and size (NULL, -1: None); False for other items.
    No C-API call that can let the thread state go (see _held_bytes)."""
    if item == <PyObject*>None:
        p[0], n[0] = NULL, -1
    elif PyBytes_CheckExact(<object>item):
        p[0], n[0] = <const uint8_t*>PyBytes_AS_STRING(<object>item), \
            PyBytes_GET_SIZE(<object>item)
    else:
        return False
    return True


cdef object _held_bytes(object obj, const uint8_t** ptrs, Py_ssize_t* lens, Py_ssize_t m):
    """If obj is a list or tuple of m exact bytes / None: its items' pointers and lengths
    (-1: None), and a tuple holding them; else None. A list is read in one pass under its
    lock (free-threaded; with the GIL nothing else runs meanwhile), so another thread's change
    is in it wholly or not at all: what tuple(list) gives the pure twin (_read_once), without
    a second pass over the items."""
    cdef Py_ssize_t j
    cdef PyObject* item
    cdef bint ok = True
    if type(obj) is tuple:
        if len(<tuple>obj) != m:
            return None
        for j in range(m):
            if not _point(PyTuple_GET_ITEM(obj, j), &ptrs[j], &lens[j]):
                return None
        return obj
    if type(obj) is not list:
        return None
    held = PyTuple_New(m)  # made first: nothing in the section below may detach
    with cython.critical_section(obj):
        ok = PyList_GET_SIZE(obj) == m
        for j in range(m if ok else 0):
            item = PyList_GET_ITEM(obj, j)  # borrowed, safe while the list's lock is held
            if not _point(item, &ptrs[j], &lens[j]):
                ok = False
                break
            Py_INCREF(<object>item)
            PyTuple_SET_ITEM(held, j, <object>item)  # steals the reference taken above
    return held if ok else None


cdef int64_t* _int_column(object pa, object arr, Py_ssize_t n, str name, bint stamps,
                          int64_t* top) except NULL:
    """A pyarrow integer (or, for stamps, timestamp) column as n int64 (-1: null), checked
    non-negative; top: the largest."""
    cdef int64_t* out
    cdef const int64_t* vals
    cdef const uint8_t* valid
    cdef Py_ssize_t k = 0, m, off, bad
    cdef int64_t mul = 1, div = 1, limit = INT32_MAX
    t = arr.type
    if stamps and pa.types.is_timestamp(t):
        mul, div = _UNITS[t.unit]
    elif not pa.types.is_integer(t):
        raise TypeError("%s: a pyarrow array of type %s is not supported (an integer%s array)"
                        % (name, t, " or timestamp" if stamps else ""))
    if stamps:
        limit = (1 << 62) // mul
    try:
        arr = arr.cast(pa.int64())
    except (pa.ArrowInvalid, OverflowError) as e:
        raise ValueError("%s: %s" % (name, e)) from None
    out = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    if out == NULL:
        raise MemoryError()
    try:
        for chunk in _chunks(arr):
            m, off = len(chunk), chunk.offset
            if m == 0:
                continue
            bufs = chunk.buffers()
            valid = _addr(bufs[0], (off + m + 7) >> 3, name) if chunk.null_count else NULL
            vals = <const int64_t*>_addr(bufs[1], (off + m) * 8, name) + off
            with nogil:
                bad = _scale(vals, valid, off, m, mul, div, limit, out + k, top)
            if bad >= 0:
                raise ValueError("%s[%d] is out of range: %d" % (name, k + bad, vals[bad]))
            k += m
    except BaseException:
        free(out)
        raise
    return out


cdef inline uint8_t* _grow(uint8_t** buf, Py_ssize_t* cap, Py_ssize_t need) noexcept nogil:
    """buf[0] with room for need bytes (realloc'd), or NULL if out of memory."""
    cdef Py_ssize_t size
    cdef uint8_t* p
    if need > cap[0]:
        size = need if need > cap[0] * 2 else cap[0] * 2
        if size < 256:
            size = 256
        p = <uint8_t*>realloc(buf[0], size)
        if p == NULL:
            return NULL
        buf[0], cap[0] = p, size
    return buf[0]


cdef inline Py_ssize_t _put(uint8_t* p, const uint8_t* src, int64_t n) noexcept nogil:
    """A header field (varint length, bytes) at p; its size."""
    cdef Py_ssize_t w = write_varint(p, n)
    if n > 0:
        memcpy(p + w, src, <size_t>n)
        w += n
    return w


cdef struct HeaderChunk:   # one chunk of list<struct<key: string, value: binary>>
    Py_ssize_t m, off            # records, list array offset
    Py_ssize_t nitems, koff, voff  # entries in the struct child; key and value child offsets
    int lw, kw, vw               # offset widths (4 or 8) of the list, keys and values
    const uint8_t* lvalid
    const uint8_t* lo
    const uint8_t* ko
    const uint8_t* vo
    const uint8_t* kdata
    const uint8_t* vdata
    const uint8_t* vvalid


cdef inline int64_t _at(const uint8_t* offsets, int width, Py_ssize_t i) noexcept nogil:
    return (<const int32_t*>offsets)[i] if width == 4 else (<const int64_t*>offsets)[i]


cdef int _encode_header_chunk(const HeaderChunk* h, uint8_t** buf, Py_ssize_t* cap,
                              Py_ssize_t* pos_io, int64_t* hoff, int32_t* hcount,
                              int64_t* hraw) noexcept nogil:
    """Encode each record's headers at buf[0] + pos (grown as needed); hoff/hcount/hraw
    from record 0 of this chunk. 0, -1 for list offsets outside the entries, -2 no memory."""
    cdef Py_ssize_t j, e, pos = pos_io[0]
    cdef int64_t s, t, ks, ke, vs, ve, raw
    cdef int32_t count
    cdef uint8_t* p
    for j in range(h.m):
        count, raw = 0, 0
        if _bit(h.lvalid, h.off + j):
            s = _at(h.lo, h.lw, h.off + j)
            t = _at(h.lo, h.lw, h.off + j + 1)
            if s < 0 or t < s or t > h.nitems:
                return -1
            for e in range(s, t):
                ks = _at(h.ko, h.kw, h.koff + e)
                ke = _at(h.ko, h.kw, h.koff + e + 1)
                vs, ve = 0, -1
                if _bit(h.vvalid, h.voff + e):
                    vs = _at(h.vo, h.vw, h.voff + e)
                    ve = _at(h.vo, h.vw, h.voff + e + 1)
                p = _grow(buf, cap, pos + 20 + (ke - ks) + (ve - vs if ve > vs else 0))
                if p == NULL:
                    return -2
                pos += _put(p + pos, h.kdata + ks, ke - ks)
                if ve < 0:
                    pos += write_varint(p + pos, -1)
                else:
                    pos += _put(p + pos, h.vdata + vs, ve - vs)
                count += 1
                raw += (ke - ks) + (ve - vs if ve > vs else 0)
        hoff[j + 1] = pos
        hcount[j], hraw[j] = count, raw
    pos_io[0] = pos
    return 0


cdef Py_ssize_t _scale(const int64_t* vals, const uint8_t* valid, Py_ssize_t off, Py_ssize_t m,
                       int64_t mul, int64_t div, int64_t limit, int64_t* out,
                       int64_t* top) noexcept nogil:
    """out[j] = vals[j] * mul // div (-1 if null); the index of a value outside 0..limit, or
    -1 if none."""
    cdef Py_ssize_t j
    cdef int64_t v
    for j in range(m):
        if not _bit(valid, off + j):
            out[j] = -1
            continue
        v = vals[j]
        if v < 0 or v > limit:
            return j
        out[j] = v * mul // div
        if out[j] > top[0]:
            top[0] = out[j]
    return -1


# ---- the columns (GIL) ----

cdef int _binary(Columns* cols, int which, object obj, str name, object serializer,
                 object topic, object hrows, Py_ssize_t n, list keep) except -1:
    """Column `which` (0 values, 1 keys) from a pyarrow array or a Python sequence."""
    cdef BinCursor* cur = &cols.values if which == 0 else &cols.keys
    cdef BinChunk* chunks
    cdef Py_ssize_t k, j, m
    cdef const uint8_t** ptrs
    cdef Py_ssize_t* lens
    pa = _arrow(obj)
    if pa is not None:
        chunks_list = _chunks(obj)
        for chunk in chunks_list:
            if not _is_binary(pa, chunk.type):
                raise TypeError("%s: a pyarrow array of type %s is not supported (binary, "
                                "large_binary, string or large_string)" % (name, chunk.type))
        m = len(chunks_list)
        chunks = <BinChunk*>calloc(max(m, 1), sizeof(BinChunk))
        if chunks == NULL:
            raise MemoryError()
        cols.chunk_mem[which] = chunks
        cur.chunks, cur.nchunks = chunks, m
        keep.append(chunks_list)
        j = 0
        for k, chunk in enumerate(chunks_list):
            _arrow_binary(pa, chunk, &chunks[k], name)
            j += chunks[k].length
        if j != n:  # the walk reads n records
            raise ValueError("%s has %d entries in its chunks, %d expected" % (name, j, n))
        return 0
    m = n  # the walk reads n records: every path below checks the column has n
    fixed = type(obj) is _NpColumn and obj.kind == "S"  # read in place: no pointer a record
    chunks = <BinChunk*>calloc(1, sizeof(BinChunk) + (0 if fixed else max(m, 1) * (
        sizeof(uint8_t*) + sizeof(Py_ssize_t))))
    if chunks == NULL:
        raise MemoryError()
    cols.chunk_mem[which] = chunks
    cur.chunks, cur.nchunks = chunks, 1
    if fixed:
        keep.append(np_fixed(obj, m, name, &chunks.data))
        chunks.length, chunks.fixed, chunks.width = m, True, obj.arr.dtype.itemsize
        return 0
    ptrs = <const uint8_t**>(<char*>chunks + sizeof(BinChunk))
    lens = <Py_ssize_t*>(<char*>ptrs + max(m, 1) * sizeof(uint8_t*))
    # Plain bytes and None in a list or tuple: pointed at in one pass, a tuple holding them;
    # anything else goes through _binary_rows.
    if type(obj) is _NpColumn:  # U: encoded to UTF-8
        rows = np_binary(obj, ptrs, lens, m, name)
    else:
        rows = _held_bytes(obj, ptrs, lens, m) if serializer is None else None
    if rows is None:
        rows = _binary_rows(obj, name, serializer, topic, hrows, m)
        for j in range(m):
            item = rows[j]
            if item is None:
                ptrs[j], lens[j] = NULL, -1
            else:
                ptrs[j] = <const uint8_t*>PyBytes_AS_STRING(item)
                lens[j] = PyBytes_GET_SIZE(item)
    keep.append(rows)
    chunks.length, chunks.ptrs, chunks.lens = m, ptrs, lens
    return 0


cdef int _alloc_headers(Columns* cols, Py_ssize_t n) except -1:
    cols.hoff = <int64_t*>malloc((n + 1) * sizeof(int64_t))
    cols.hcount = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
    cols.hraw = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    if cols.hoff == NULL or cols.hcount == NULL or cols.hraw == NULL:
        raise MemoryError()
    cols.hoff[0] = 0
    return 0


cdef int _py_headers(Columns* cols, list rows) except -1:
    """Headers given as Python lists: encoded one record at a time."""
    cdef Py_ssize_t n = len(rows), j, cap = 0, pos = 0, hl
    cdef int32_t count
    cdef int64_t raw
    cdef bytes enc
    _alloc_headers(cols, n)
    for j in range(n):
        entry = rows[j]
        if type(entry) is list:  # encoded and counted from one copy (another thread's
            entry = tuple(entry)  # change is in it wholly or not at all)
        count, raw, hl = 0, 0, 0
        if entry:
            enc = encode_headers(entry, &count)
            hl = PyBytes_GET_SIZE(enc)
            if _grow(&cols.hdata, &cap, pos + hl) == NULL:
                raise MemoryError()
            memcpy(cols.hdata + pos, PyBytes_AS_STRING(enc), hl)
            for hk, hv in entry:
                raw += len((<str>hk).encode("utf-8")) + (len(hv) if hv is not None else 0)
        pos += hl
        cols.hoff[j + 1] = pos
        cols.hcount[j], cols.hraw[j] = count, raw
    return 0


cdef int _arrow_headers(Columns* cols, object pa, object arr, Py_ssize_t n) except -1:
    """Headers as a pyarrow list<struct<key: string, value: binary>> column, encoded
    from its buffers."""
    cdef HeaderChunk h
    cdef Py_ssize_t k = 0, cap = 0, pos = 0, nitems
    cdef int rc
    _alloc_headers(cols, n)
    for chunk in _chunks(arr):
        h.m, h.off = len(chunk), chunk.offset
        if h.m == 0:
            continue
        h.lw = 8 if pa.types.is_large_list(chunk.type) else 4
        bufs = chunk.buffers()
        h.lvalid = _addr(bufs[0], (h.off + h.m + 7) >> 3, "headers") \
            if chunk.null_count else NULL
        h.lo = _addr(bufs[1], (h.off + h.m + 1) * h.lw, "headers")
        items = chunk.values
        h.nitems = nitems = len(items)
        if items.null_count:
            raise ValueError("headers: a header entry is null")
        hkeys, hvals = items.field("key"), items.field("value")
        if hkeys.null_count:
            raise ValueError("headers: a header key is null")
        h.kw = 8 if pa.types.is_large_string(hkeys.type) else 4
        h.vw = 8 if pa.types.is_large_binary(hvals.type) or \
            pa.types.is_large_string(hvals.type) else 4
        h.koff, h.voff = hkeys.offset, hvals.offset
        kb, vb = hkeys.buffers(), hvals.buffers()
        h.ko = _addr(kb[1], (h.koff + nitems + 1) * h.kw if nitems else 0, "headers")
        h.vo = _addr(vb[1], (h.voff + nitems + 1) * h.vw if nitems else 0, "headers")
        h.kdata = _addr(kb[2], 0, "headers") if kb[2] is not None else NULL
        h.vdata = _addr(vb[2], 0, "headers") if vb[2] is not None else NULL
        h.vvalid = _addr(vb[0], (h.voff + nitems + 7) >> 3, "headers") \
            if hvals.null_count else NULL
        if nitems and (_check_offsets(
                <const int32_t*>h.ko + h.koff if h.kw == 4 else NULL,
                <const int64_t*>h.ko + h.koff if h.kw == 8 else NULL, nitems,
                kb[2].size if kb[2] is not None else 0) < 0 or _check_offsets(
                <const int32_t*>h.vo + h.voff if h.vw == 4 else NULL,
                <const int64_t*>h.vo + h.voff if h.vw == 8 else NULL, nitems,
                vb[2].size if vb[2] is not None else 0) < 0):
            raise ValueError("headers: offsets outside the data buffer")
        with nogil:
            rc = _encode_header_chunk(&h, &cols.hdata, &cap, &pos, cols.hoff + k,
                                      cols.hcount + k, cols.hraw + k)
        if rc == -2:
            raise MemoryError()
        if rc < 0:
            raise ValueError("headers: list offsets outside the header entries")
        k += h.m
    return 0


cdef int _headers(Columns* cols, object obj, Py_ssize_t n) except -1:
    pa = _arrow(obj)
    if pa is None:
        return 0  # encoded one record at a time: see read_columns
    if not _arrow_headers_type(pa, obj.type):
        raise TypeError("headers: a pyarrow array of type %s is not supported "
                        "(list<struct<key: string, value: binary>>)" % (obj.type,))
    return _arrow_headers(cols, pa, obj, n)


cdef int _stamps(Columns* cols, object obj, Py_ssize_t n) except -1:
    cdef Py_ssize_t j
    cdef int64_t top = -1
    if type(obj) is _NpColumn:
        cols.stamps = np_ints(obj, n, "timestamps", _MAX_TS // obj.mul, &top)
        return 0
    pa = _arrow(obj)
    if pa is not None:
        cols.stamps = _int_column(pa, obj, n, "timestamps", True, &top)
        return 0
    rows = _int_rows(obj, "timestamps", "timestamps", n)
    cols.stamps = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
    if cols.stamps == NULL:
        raise MemoryError()
    for j in range(n):
        v = rows[j]
        cols.stamps[j] = -1 if v is None else v
    return 0


cdef int64_t _partitions(int32_t* parts, object obj, Py_ssize_t n) except -2:
    """Explicit partitions into the placement (-1: none); the largest, or -1."""
    cdef Py_ssize_t j
    cdef int64_t top = -1
    cdef int64_t* col
    pa = _arrow(obj)
    if pa is not None or type(obj) is _NpColumn:
        col = np_ints(obj, n, "partitions", INT32_MAX, &top) if pa is None else \
            _int_column(pa, obj, n, "partitions", False, &top)
        for j in range(n):
            parts[j] = <int32_t>col[j]
        free(col)
        return top
    rows = _int_rows(obj, "partitions", "partitions", n)
    for j in range(n):
        v = rows[j]
        if v is not None:
            if v > INT32_MAX:
                raise ValueError("partitions[%d] is out of range: %d" % (j, v))
            parts[j] = v
            top = max(top, v)
    return top


# ---- one call ----

cdef int64_t read_columns(Columns* cols, list keep, int32_t* parts, Py_ssize_t n, object topic,
                          object values, object keys, object headers, object partitions,
                          object timestamps, object key_serializer,
                          object value_serializer) except -2:
    """The call's columns into cols (the memory they point into appended to keep), explicit
    partitions into parts; the largest of those, or -1. TypeError / ValueError on bad input."""
    cdef int64_t top = -1
    hrows = None
    if headers is not None:
        _headers(cols, headers, n)
        if _arrow(headers) is None:
            hrows = _header_rows(headers, n)
            _py_headers(cols, hrows)
    if hrows is None:
        hrows = _NoHeaders()
    _binary(cols, 0, values, "values", value_serializer, topic, hrows, n, keep)
    if keys is not None:
        _binary(cols, 1, keys, "keys", key_serializer, topic, hrows, n, keep)
        cols.has_keys = True
    if partitions is not None:
        top = _partitions(parts, partitions, n)
    if timestamps is not None:
        _stamps(cols, timestamps, n)
    return top


class _NoHeaders:
    """headers[i] is None for every i (what serializers get without headers)."""

    def __getitem__(self, i):
        return None
