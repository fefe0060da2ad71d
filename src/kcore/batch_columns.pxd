# send_batch's columns (see batch_columns.pyx): the Columns struct that batch_send's _Call
# embeds, read_columns that fills it and next_record that walks it. Cimported by batch_send only.
# Internal: not in kcore's names.
#
# Threads (the one place these rules are written; batch_columns.pyx points here): a Columns,
# its BinChunk arrays and its header and timestamp arrays belong to the one caller thread in
# send_batch whose _Call embeds it. read_columns fills it with the GIL (the GIL-free helpers it
# calls, _check_offsets, _scale and _encode_header_chunk, read only the buffers and write only
# the arrays they are given); the walk (batch_send.pxd) then reads it without the GIL. What
# the chunks point into (bytes objects and pyarrow buffers, immutable; a numpy S array's
# buffer, held by a memoryview) is kept alive by the list given to read_columns (_Call.keep);
# every column holds exactly n records, checked by read_columns, so next_record reads n records
# and no more. A numpy array stays writable: a thread writing it during the call can tear a
# record's bytes, never move its bounds (a fixed-width record's length is at most its width).
# Python sequences (read_columns, with the GIL or, free-threaded, an attached thread state):
# another thread may change a list column at any time, so no list is read by index after its
# length was taken (PyList_GET_ITEM, PySequence_Fast_ITEMS, a compiled `for x in a_list`; one
# ran past the end of a list cleared meanwhile: IndexError, and a borrowed item could be freed).
# A list of values or keys without a serializer is read in one pass under the list's lock
# (_held_bytes: cython.critical_section, as PyList_AsTuple does; borrowed items only inside it,
# and no C-API call there that can detach the thread state and so suspend the section) into a
# tuple whose bytes the walk then points into; with a serializer, through its iterator; other
# list columns and each header entry as one copy (list() / tuple()). The length read is
# checked against n: ValueError if it differs.
# nogil: next_record, free_columns.
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free


# One chunk of a binary column: Arrow buffers, a pointer and a length (-1: null) a record, or
# fixed-width records (numpy S: record j is data[j * width:][:width], trailing NULs dropped).
cdef struct BinChunk:
    Py_ssize_t length
    bint fixed                   # fixed-width records, at data
    Py_ssize_t width
    const uint8_t* valid         # validity bitmap, NULL if no nulls
    Py_ssize_t voff              # its bit offset (the array's offset)
    const int32_t* off32         # offsets from the array's offset (one of off32 / off64)
    const int64_t* off64
    const uint8_t* data
    const uint8_t** ptrs         # or these two
    const Py_ssize_t* lens


# A column read in record order: chunk ci, its record pos.
cdef struct BinCursor:
    BinChunk* chunks
    Py_ssize_t nchunks, ci, pos


# One call's columns as its walk reads them (all zero: none read yet).
cdef struct Columns:
    BinCursor values, keys
    bint has_keys
    BinChunk* chunk_mem[2]       # the values' and the keys' chunks (owned)
    # headers, encoded as the record format wants them: record i's are
    # hdata[hoff[i]:hoff[i + 1]], hcount[i] of them, hraw[i] key and value bytes (NULL: none)
    int64_t* hoff
    uint8_t* hdata
    int32_t* hcount
    int64_t* hraw
    int64_t* stamps              # -1: now; NULL: all now


# The call's columns into cols (what they point into appended to keep), explicit partitions
# into parts (n of them, -1 left for none); the largest partition, or -1. TypeError /
# ValueError on bad input, before any record is appended.
cdef int64_t read_columns(Columns* cols, list keep, int32_t* parts, Py_ssize_t n, object topic,
                          object values, object keys, object headers, object partitions,
                          object timestamps, object key_serializer,
                          object value_serializer) except -2


cdef inline void next_record(BinCursor* c, const uint8_t** p, Py_ssize_t* n) noexcept nogil:
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
    if ch.fixed:
        p[0] = ch.data + j * ch.width
        s = ch.width
        while s > 0 and p[0][s - 1] == 0:
            s -= 1
        n[0] = <Py_ssize_t>s
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


cdef inline void free_columns(Columns* cols) noexcept nogil:
    free(cols.chunk_mem[0])
    free(cols.chunk_mem[1])
    free(cols.hoff)
    free(cols.hdata)
    free(cols.hcount)
    free(cols.hraw)
    free(cols.stamps)
