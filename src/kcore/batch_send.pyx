# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/batch_send.py (see it for the design).

Arrow columns are read from their buffers (validity bitmap, int32/int64 offsets, data, from the
array's offset, chunk after chunk); Python sequences become a pointer and a length per record.
The walk over the records runs without the GIL: it partitions (explicit, murmur2, sticky) and
appends straight into the batches the call holds (marked ``appending``: drain() and other
senders leave them), and takes the GIL only to hold another batch, to switch the sticky
partition and at the end. No Python object is made per record of an Arrow column.
Threads: see batch_send.pxd.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, memset

from kcore.buffer_pool cimport BP_OK, BP_WOULD_BLOCK, BufferPool
from kcore.builtin_partitioner cimport BuiltInPartitioner, partition_for_key
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport ProducerBatch, size_upper_bound
from kcore.record_accumulator cimport RecordAccumulator, TopicInfo, _raise_pool
from kcore.record_batch_builder cimport (RBB_APPENDED, RBB_FULL, RBB_HEADER_SIZE,
                                         RecordBatchBuilder, encode_headers)
from kcore.varint cimport write_varint

from kcore.future import BatchFuture
from kcore.record_accumulator import _too_large
from kcore.send_path import _not_in_metadata
from kcore.errors import IllegalStateError, KafkaError, KafkaTimeoutError

include "shared/batch_send.py"  # the input checks (_arrow, _binary_rows, ...), compiled in here

__all__ = ["BatchSendPath", "prepare_rows"]

cdef extern from "clock_impl.h" nogil:
    int64_t kc_wall_ms()

cdef enum:
    WALK_DONE = 0
    WALK_NO_BATCH = 1     # no batch held for stop_part
    WALK_FULL = 2         # the held batch of stop_part is full
    WALK_NO_STICKY = 3    # no sticky partition chosen yet
    WALK_AFTER = 4        # after the record: its batch became sendable (stop_full) and/or
                          # the sticky partition is due to change (stop_switch)
    WALK_ERROR = 5        # the builder refused a record (stop_rc)
    WALK_WIDEN = 6        # the sticky partition (another thread's) is past the call's slots

cdef uint8_t _empty[1]


# ---- reading columns (nogil) ----

cdef inline void _next(BinCursor* c, const uint8_t** p, Py_ssize_t* n) noexcept nogil:
    """The cursor's record (p, n; n = -1: null), and the cursor past it."""
    cdef BinChunk* ch = c.chunks + c.ci
    cdef Py_ssize_t j
    cdef int64_t s
    while c.pos >= ch.length:  # past the end of a chunk (or an empty one)
        c.ci += 1
        c.pos = 0
        ch += 1
    j = c.pos
    c.pos = j + 1
    if ch.ptrs != NULL:
        p[0] = ch.ptrs[j]
        n[0] = ch.lens[j]
        return
    if ch.valid != NULL and not (ch.valid[(ch.voff + j) >> 3] >> ((ch.voff + j) & 7)) & 1:
        p[0] = NULL
        n[0] = -1
        return
    if ch.off32 != NULL:
        s = ch.off32[j]
        n[0] = <Py_ssize_t>(ch.off32[j + 1] - s)
    else:
        s = ch.off64[j]
        n[0] = <Py_ssize_t>(ch.off64[j + 1] - s)
    p[0] = ch.data + s


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


cdef object _held_bytes(object obj, const uint8_t** ptrs, Py_ssize_t* lens, Py_ssize_t m):
    """If obj is a list or tuple of m exact bytes / None: its items' pointers and lengths
    (-1: None) and a list holding them (obj may change meanwhile); else None."""
    cdef Py_ssize_t j
    cdef list held
    if (type(obj) is not list and type(obj) is not tuple) or len(obj) != m:
        return None
    held = PyList_New(m)
    for j in range(m):
        item = obj[j]
        if item is None:
            ptrs[j], lens[j] = NULL, -1
        elif PyBytes_CheckExact(item):
            ptrs[j] = <const uint8_t*>PyBytes_AS_STRING(item)
            lens[j] = PyBytes_GET_SIZE(item)
        else:
            return None
        Py_INCREF(item)
        PyList_SET_ITEM(held, j, item)
    return held


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


# ---- the walk ----

cdef class _Placement:
    """The partition of each record of a call (-1: not appended, -2: refused), kept for the
    future: failed (partition, rank) ranges back to record indices, in one pass."""
    cdef int32_t* parts          # a record's partition; -1 not appended, -2 refused
    cdef Py_ssize_t n

    def __cinit__(self, Py_ssize_t n):
        self.n = n
        self.parts = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        if self.parts == NULL:
            raise MemoryError()
        for i in range(n):
            self.parts[i] = -1

    def __dealloc__(self):
        free(self.parts)

    def locate(self, ranges):
        cdef dict by_part = {}
        cdef dict seen = {}
        cdef Py_ssize_t i, j
        cdef int32_t part, top = -1
        cdef int64_t* rank
        cdef Py_ssize_t* at
        cdef list lst, out = []
        for r in ranges:
            by_part.setdefault(r[0], []).append(r[1:])
        for p, lst in by_part.items():
            lst.sort(key=lambda r: r[0])
            top = max(top, p)
        rank = <int64_t*>calloc(top + 1, sizeof(int64_t))
        at = <Py_ssize_t*>calloc(top + 1, sizeof(Py_ssize_t))
        try:
            if rank == NULL or at == NULL:
                raise MemoryError()
            for i in range(self.n):
                part = self.parts[i]
                if part < 0 or part > top:
                    continue
                rank[part] += 1
                lst = by_part.get(part)
                if lst is None:
                    continue
                j = at[part]
                while j < len(lst) and lst[j][0] + lst[j][1] <= rank[part] - 1:
                    j += 1
                at[part] = j
                if j < len(lst) and lst[j][0] <= rank[part] - 1:
                    start, count, error, record_errors = lst[j]
                    exc = error if error is not None else \
                        (record_errors or {}).get(rank[part] - 1)
                    if exc is not None:
                        out.append((i, exc))
        finally:
            free(rank)
            free(at)
        return out


cdef class _Call:
    """One send_batch call: its columns, the batches it holds, its walk."""
    cdef object path, future
    cdef RecordAccumulator acc
    cdef TopicInfo info
    cdef BuiltInPartitioner partitioner  # the topic's, for null keys
    cdef _Placement placed
    cdef list keep               # whatever the column pointers point into
    cdef BinCursor values, keys
    cdef bint has_keys
    cdef BinChunk* chunk_mem[2]
    # headers, encoded as the record format wants them
    cdef int64_t* hoff
    cdef uint8_t* hdata
    cdef int32_t* hcount
    cdef int64_t* hraw
    cdef int64_t* stamps         # -1: now; NULL: all now
    cdef int64_t now
    cdef Slot* slots
    cdef int nparts              # slots (grown when the topic grows under the call)
    cdef int key_parts           # the partition count keys are placed by (the call's first)
    cdef Py_ssize_t n, i, appended
    cdef Py_ssize_t limit
    cdef bint rolled             # the sticky partition's batch filled since it was chosen
    cdef int stop_part           # where the walk stopped, and the record's size estimate
    cdef Py_ssize_t stop_size
    cdef int stop_rc
    cdef bint stop_full, stop_switch
    cdef Py_ssize_t* too_large   # (index, size) pairs of records over the size limit
    cdef Py_ssize_t ntoo_large, cap_too_large

    def __cinit__(self):
        self.keep = []

    def __dealloc__(self):
        free(self.chunk_mem[0])
        free(self.chunk_mem[1])
        free(self.hoff)
        free(self.hdata)
        free(self.hcount)
        free(self.hraw)
        free(self.stamps)
        free(self.too_large)
        if self.slots != NULL:
            for i in range(self.nparts):
                if self.slots[i].batch != NULL:
                    Py_DECREF(<object>self.slots[i].batch)
            free(self.slots)

    # -- columns ----------------------------------------------------------------------------
    cdef int _binary(self, int which, object obj, str name, object serializer, object topic,
                     object hrows) except -1:
        """Column `which` (0 values, 1 keys) from a pyarrow array or a Python sequence."""
        cdef BinCursor* cur = &self.values if which == 0 else &self.keys
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
            self.chunk_mem[which] = chunks
            cur.chunks, cur.nchunks = chunks, m
            self.keep.append(chunks_list)
            j = 0
            for k, chunk in enumerate(chunks_list):
                _arrow_binary(pa, chunk, &chunks[k], name)
                j += chunks[k].length
            if j != self.n:  # the walk reads n records
                raise ValueError("%s has %d entries in its chunks, %d expected" % (name, j,
                                                                                  self.n))
            return 0
        m = self.n  # the walk reads n records: every path below checks the column has n
        chunks = <BinChunk*>calloc(1, sizeof(BinChunk) + max(m, 1) * (sizeof(uint8_t*) +
                                                                   sizeof(Py_ssize_t)))
        if chunks == NULL:
            raise MemoryError()
        self.chunk_mem[which] = chunks
        ptrs = <const uint8_t**>(<char*>chunks + sizeof(BinChunk))
        lens = <Py_ssize_t*>(<char*>ptrs + max(m, 1) * sizeof(uint8_t*))
        # Plain bytes and None in a list or tuple: pointed at in one pass, a copy of the
        # sequence holding them; anything else goes through _binary_rows.
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
        self.keep.append(rows)
        chunks.length, chunks.ptrs, chunks.lens = m, ptrs, lens
        cur.chunks, cur.nchunks = chunks, 1
        return 0

    cdef int _alloc_headers(self, Py_ssize_t n) except -1:
        self.hoff = <int64_t*>malloc((n + 1) * sizeof(int64_t))
        self.hcount = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        self.hraw = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
        if self.hoff == NULL or self.hcount == NULL or self.hraw == NULL:
            raise MemoryError()
        self.hoff[0] = 0
        return 0

    cdef int _py_headers(self, list rows) except -1:
        """Headers given as Python lists: encoded one record at a time."""
        cdef Py_ssize_t n = len(rows), j, cap = 0, pos = 0, hl
        cdef int32_t count
        cdef int64_t raw
        cdef bytes enc
        self._alloc_headers(n)
        for j in range(n):
            entry = rows[j]
            count, raw, hl = 0, 0, 0
            if entry:
                enc = encode_headers(entry, &count)
                hl = PyBytes_GET_SIZE(enc)
                if _grow(&self.hdata, &cap, pos + hl) == NULL:
                    raise MemoryError()
                memcpy(self.hdata + pos, PyBytes_AS_STRING(enc), hl)
                for hk, hv in entry:
                    raw += len((<str>hk).encode("utf-8")) + (len(hv) if hv is not None else 0)
            pos += hl
            self.hoff[j + 1] = pos
            self.hcount[j], self.hraw[j] = count, raw
        return 0

    cdef int _arrow_headers(self, object pa, object arr, Py_ssize_t n) except -1:
        """Headers as a pyarrow list<struct<key: string, value: binary>> column, encoded
        from its buffers."""
        cdef HeaderChunk h
        cdef Py_ssize_t k = 0, cap = 0, pos = 0, nitems
        cdef int rc
        self._alloc_headers(n)
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
                rc = _encode_header_chunk(&h, &self.hdata, &cap, &pos, self.hoff + k,
                                          self.hcount + k, self.hraw + k)
            if rc == -2:
                raise MemoryError()
            if rc < 0:
                raise ValueError("headers: list offsets outside the header entries")
            k += h.m
        return 0

    cdef int _headers(self, object obj, Py_ssize_t n) except -1:
        pa = _arrow(obj)
        if pa is None:
            return 0  # encoded after the values: see prepare
        if not _arrow_headers_type(pa, obj.type):
            raise TypeError("headers: a pyarrow array of type %s is not supported "
                            "(list<struct<key: string, value: binary>>)" % (obj.type,))
        return self._arrow_headers(pa, obj, n)

    cdef int _stamps(self, object obj, Py_ssize_t n) except -1:
        cdef Py_ssize_t j
        cdef int64_t top = -1
        pa = _arrow(obj)
        if pa is not None:
            self.stamps = _int_column(pa, obj, n, "timestamps", True, &top)
            return 0
        rows = _int_rows(obj, "timestamps", "timestamps", n)
        self.stamps = <int64_t*>malloc(max(n, 1) * sizeof(int64_t))
        if self.stamps == NULL:
            raise MemoryError()
        for j in range(n):
            v = rows[j]
            self.stamps[j] = -1 if v is None else v
        return 0

    cdef int64_t _partitions(self, object obj, Py_ssize_t n) except -2:
        """Explicit partitions into the placement (-1: none); the largest, or -1."""
        cdef Py_ssize_t j
        cdef int64_t top = -1
        cdef int64_t* col
        pa = _arrow(obj)
        if pa is not None:
            col = _int_column(pa, obj, n, "partitions", False, &top)
            for j in range(n):
                self.placed.parts[j] = <int32_t>col[j]
            free(col)
            return top
        rows = _int_rows(obj, "partitions", "partitions", n)
        for j in range(n):
            v = rows[j]
            if v is not None:
                if v > INT32_MAX:
                    raise ValueError("partitions[%d] is out of range: %d" % (j, v))
                self.placed.parts[j] = v
                top = max(top, v)
        return top

    # -- the walk ---------------------------------------------------------------------------
    cdef int _walk(self) noexcept nogil:
        """Append records from self.i on until one needs the GIL; a WALK_* code."""
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp
        cdef const uint8_t* hp = NULL
        cdef Py_ssize_t kl = -1, vl, hl = 0, size, vci, vpos, kci = 0, kpos = 0, i = self.i
        cdef int32_t hc = 0
        cdef int64_t hraw = 0, ts
        cdef int part, rc
        cdef bint sticky, switch, full
        cdef Slot* slot
        cdef int32_t* parts = self.placed.parts
        while i < self.n:
            vci, vpos = self.values.ci, self.values.pos
            _next(&self.values, &vp, &vl)
            if self.has_keys:
                kci, kpos = self.keys.ci, self.keys.pos
                _next(&self.keys, &kp, &kl)
            if self.hoff != NULL:
                hp = self.hdata + self.hoff[i]
                hl = <Py_ssize_t>(self.hoff[i + 1] - self.hoff[i])
                hc, hraw = self.hcount[i], self.hraw[i]
            size = size_upper_bound(kl, vl, hraw, hc)
            if RBB_HEADER_SIZE + size > self.limit:
                if self._refuse(i, size) < 0:
                    self.stop_rc = -1
                    self.i = i
                    return WALK_ERROR
                parts[i] = -2
                i += 1
                continue
            part = parts[i]
            sticky = False
            if part < 0:
                if kl >= 0:
                    part = partition_for_key(kp, kl, self.key_parts)
                else:
                    # Read without the GIL: another thread may switch it, to a partition
                    # the topic gained after this call sized its slots (a hint: checked).
                    part = self.partitioner.sticky
                    sticky = True
            # Explicit and keyed partitions are below nparts; only the sticky one can be past
            if part < 0 or part >= self.nparts or self.slots[part].batch == NULL:
                self.values.ci, self.values.pos = vci, vpos
                self.keys.ci, self.keys.pos = kci, kpos
                self.i = i
                self.stop_part, self.stop_size = part, size
                return WALK_NO_STICKY if part < 0 else \
                    WALK_WIDEN if part >= self.nparts else WALK_NO_BATCH
            slot = &self.slots[part]
            ts = self.now
            if self.stamps != NULL and self.stamps[i] >= 0:
                ts = self.stamps[i]
            rc = (<RecordBatchBuilder>slot.builder).append_raw(ts, kp, kl, vp, vl, hp, hl, hc)
            if rc != RBB_APPENDED:
                self.values.ci, self.values.pos = vci, vpos
                self.keys.ci, self.keys.pos = kci, kpos
                self.i = i
                self.stop_part, self.stop_size, self.stop_rc = part, size, rc
                return WALK_FULL if rc == RBB_FULL else WALK_ERROR
            slot.count += 1
            slot.added += size
            parts[i] = part
            i += 1
            self.appended += 1
            switch = sticky and self.partitioner._add_produced(part, size)
            full = (<RecordBatchBuilder>slot.builder).pos >= slot.full_at
            if (full and slot.let_go) or (switch and (full or self.rolled)):
                self.i = i
                self.stop_part = part
                self.stop_full, self.stop_switch = full, switch
                return WALK_AFTER
        self.i = i
        return WALK_DONE

    cdef int _refuse(self, Py_ssize_t i, Py_ssize_t size) noexcept nogil:
        cdef Py_ssize_t* p
        if self.ntoo_large == self.cap_too_large:
            p = <Py_ssize_t*>realloc(self.too_large,
                                     max(16, self.cap_too_large * 2) * 2 * sizeof(Py_ssize_t))
            if p == NULL:
                return -1
            self.too_large = p
            self.cap_too_large = max(16, self.cap_too_large * 2)
        self.too_large[2 * self.ntoo_large] = i
        self.too_large[2 * self.ntoo_large + 1] = size
        self.ntoo_large += 1
        return 0

    cdef int run(self) except -1:
        cdef int st, part
        try:
            while True:
                self.now = kc_wall_ms()
                with nogil:
                    st = self._walk()
                if st == WALK_DONE:
                    break
                part = self.stop_part
                if st == WALK_NO_STICKY:
                    self.partitioner._sticky_partition()
                elif st == WALK_WIDEN:
                    self._widen(part)
                elif st == WALK_NO_BATCH:
                    self._take(part, self.stop_size)
                elif st == WALK_FULL:
                    if not (<ProducerBatch>self.slots[part].batch).grow(self.stop_size):
                        self._roll(part)
                        self._take(part, self.stop_size)
                elif st == WALK_AFTER:
                    if self.stop_full:
                        if self.slots[part].let_go:  # sendable: the Sender may take it now
                            self._release(part)      # (else it is held again, and grows)
                            self.path.wakeup()
                        if part == self.partitioner.sticky:
                            self.rolled = True
                    # the batch it filled is full: enable the switch
                    if self.stop_switch and self.rolled and self.partitioner._switch_from(part):
                        self.rolled = False
                elif self.stop_rc == -1:
                    raise MemoryError()
                else:
                    raise ValueError("record %d cannot be encoded (error %d)"
                                     % (self.i, self.stop_rc))
        except KafkaTimeoutError as e:
            raise KafkaTimeoutError("send_batch: %s; %d of %d records were appended before "
                                    "and will still be delivered"
                                    % (e, self.appended, self.n)) from e
        finally:
            self._release_all()
            self.path.wakeup()
        self.future._add_pending(self.appended - self.n)  # see send()
        for j in range(self.ntoo_large):
            self.future._fail_now(self.too_large[2 * j], _too_large(
                RBB_HEADER_SIZE + self.too_large[2 * j + 1], self.path.max_request_size,
                self.path.buffer_memory))
        return 0

    # -- batches (GIL) ----------------------------------------------------------------------
    cdef ProducerBatch _holdable(self, PartitionQueue dq):
        cdef ProducerBatch batch = dq.last()
        if batch is None or batch.closed or batch.appending:
            return None
        return batch

    cdef int _take(self, int part, Py_ssize_t size) except -1:
        """Hold the partition's open last batch, or a new one."""
        cdef RecordAccumulator acc = self.acc
        cdef BufferPool pool = acc.pool
        cdef ProducerBatch batch
        cdef Py_ssize_t need
        cdef uint8_t* mem = NULL
        cdef double max_block_ms
        cdef int rc, other
        cdef Slot* slot
        cdef bint new = False
        cdef PartitionQueue dq = self.info.deques[part]
        batch = self._holdable(dq)
        if batch is None:
            need = max(acc.batch_size, RBB_HEADER_SIZE + size)
            rc = pool._try_now(need, &mem)
            if rc == BP_WOULD_BLOCK:  # let go of the other batches, then wait for memory
                self._release_all()
                max_block_ms = self.path.max_block_ms
                with nogil:
                    rc = pool.acquire_raw(need, max_block_ms, &mem)
            if rc != BP_OK:
                _raise_pool(rc, need, self.path.max_block_ms)
            if acc._closed:
                pool.release_raw(mem, need)
                raise IllegalStateError("Producer closed while send in progress")
            batch = self._holdable(dq)
            if batch is not None:  # another thread made one while this one waited
                pool.release_raw(mem, need)
            else:
                batch = acc._new_batch(dq, self.info.tps[part], mem, need)
                new = True
        # Held from here: no Python code ran since the checks above (the Sender thread could
        # have drained the batch), and drain() leaves it from now on.
        batch.appending = True
        Py_INCREF(batch)
        slot = &self.slots[part]
        slot.batch, slot.builder = <PyObject*>batch, <PyObject*>batch.builder
        slot.ordinal, slot.count, slot.added = batch.record_count, 0, 0
        slot.full_at, slot.let_go = batch.batch_size, not batch.is_full_c()
        if new:
            self.path.wakeup()
        return 0

    cdef int _widen(self, int part) except -1:
        """Slots for the topic's partitions now (another thread's metadata update grew it)."""
        cdef int n = self.info.num_partitions
        cdef Slot* grown
        if n > self.nparts:
            grown = <Slot*>realloc(self.slots, n * sizeof(Slot))
            if grown == NULL:
                raise MemoryError()
            memset(grown + self.nparts, 0, (n - self.nparts) * sizeof(Slot))
            self.slots, self.nparts = grown, n
        if part >= self.nparts:  # not a partition of the topic as this thread knows it
            self.partitioner._switch_from(part)
        return 0

    cdef int _release_all(self) except -1:
        """Let go of every held batch, each even if another one raises (the first error)."""
        cdef int part
        error = None
        for part in range(self.nparts):
            if self.slots[part].batch != NULL:
                try:
                    self._release(part)
                except BaseException as e:
                    error = e if error is None else error
        if error is not None:
            raise error
        return 0

    cdef int _roll(self, int part) except -1:
        (<ProducerBatch>self.slots[part].batch).closed = True
        if part == self.partitioner.sticky:
            self.rolled = True
        return self._release(part)

    cdef int _release(self, int part) except -1:
        """Let go of the held batch, noting the call's records in it."""
        cdef Slot* slot = &self.slots[part]
        cdef ProducerBatch batch = <ProducerBatch>slot.batch
        cdef int64_t rank = slot.rank, count = slot.count
        slot.batch = slot.builder = NULL
        Py_DECREF(batch)  # `batch` holds its own reference
        slot.rank += count
        slot.count = 0
        try:
            if count:
                batch.record_count += <int32_t>count
                batch.size += slot.added
                if not batch.add_segment_c(self.future, slot.ordinal, rank, count):
                    self.future._range_done(part, rank, count, batch.result.error or KafkaError(
                        "the batch was aborted while records were appended"))
        finally:
            batch.end_append()
        return 0


cdef class BatchSendPath:
    """KafkaProducer.send_batch (without a custom partitioner: the producer loops over send()
    for that). ``send_path`` is the producer's SendPath (closed and fork checks)."""
    cdef public object send_path, accumulator, wait_on_metadata, wakeup
    cdef public object key_serializer, value_serializer
    cdef public double max_block_ms
    cdef public int64_t max_request_size, buffer_memory

    def __init__(self, send_path, accumulator, wait_on_metadata, wakeup, *, key_serializer,
                 value_serializer, max_block_ms, max_request_size, buffer_memory):
        self.send_path = send_path
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata
        self.wakeup = wakeup
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory

    def send(self, topic, values, keys=None, headers=None, partitions=None, timestamps=None):
        """Append every record; the call's BatchFuture."""
        cdef _Call call
        cdef Py_ssize_t n
        cdef int64_t top = -1
        self.send_path.check_usable()
        n = check_columns(topic, values, keys, headers, partitions, timestamps)
        call = _Call()
        call.path, call.acc, call.n = self, self.accumulator, n
        call.placed = _Placement(n)
        hrows = None
        if headers is not None:
            call._headers(headers, n)
            if _arrow(headers) is None:
                hrows = _header_rows(headers, n)
                call._py_headers(hrows)
        if hrows is None:
            hrows = _NoHeaders()
        call._binary(0, values, "values", self.value_serializer, topic, hrows)
        if keys is not None:
            call._binary(1, keys, "keys", self.key_serializer, topic, hrows)
            call.has_keys = True
        if partitions is not None:
            top = call._partitions(partitions, n)
        if timestamps is not None:
            call._stamps(timestamps, n)
        future = BatchFuture(topic, n, call.placed.locate)
        call.future = future
        if n:
            call.info = self._topic(topic, top)
            call.nparts = call.key_parts = call.info.num_partitions
            call.partitioner = call.info.partitioner
            call.slots = <Slot*>calloc(call.nparts, sizeof(Slot))
            if call.slots == NULL:
                raise MemoryError()
            call.limit = min(self.max_request_size, self.buffer_memory)
            future._add_pending(n)  # all of them now; what was not appended off at the end
            call.run()
        future._seal()
        return future

    def _topic(self, topic, int64_t top):
        acc = self.accumulator
        part = top if top >= 0 else None
        info = acc.topic_info(topic)
        if info is None or top >= info.num_partitions:
            try:
                self.wait_on_metadata(topic, part, self.max_block_ms)
            except KafkaTimeoutError as e:
                raise KafkaTimeoutError("send_batch: %s; no records were appended" % (e,)) \
                    from e
            info = acc.topic_info(topic)
            if info is None or top >= info.num_partitions:
                raise _not_in_metadata(topic, part)
        return info


class _NoHeaders:
    """headers[i] is None for every i (what serializers get without headers)."""

    def __getitem__(self, i):
        return None
