# Kafka record batch v2 (magic 2) builder: C-level API for other kcore modules.
#
# Threads (the one place these rules are written). A builder is not thread-safe (as Java's
# MemoryRecordsBuilder): it has one owner at a time, and only the owner reads or writes its
# fields and its memory (buf[:cap], or the attached slab):
# - a ProducerBatch's builder: while the batch is held (`appending`, producer_batch.pxd), the
#   holder, with or without the GIL (append_raw without it; grow() -> move_to with it); before
#   it is in a queue, its maker; once taken off its queue, the Sender. No other thread may call
#   move_to, attach, seal, build or append on it meanwhile: move_to copies pos bytes and gives
#   the old block back under the writer.
# - any other builder: the one thread that uses it.
# Exception: pos only grows, and may be read by any thread without a lock as a size hint
#   (kc_load_ssize: ProducerBatch.is_full_c/is_grown_c in the Sender's GIL-free scans); the
#   owner's append stores it atomically (_commit). A stale value is smaller, so a batch is at
#   worst judged less full than it is.
# build() sets `built` before it lets the GIL go for the CRC: appends meanwhile get RBB_BUILT.
# nogil: attach, move_to, append_raw, seal: by the owner only (above).
from cpython.object cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t

cdef enum:
    RBB_HEADER_SIZE = 61  # batch header bytes, reserved at the start of the buffer

# append_raw results
cdef enum:
    RBB_APPENDED = 1
    RBB_FULL = 0          # does not fit in max_size (builder unchanged)
    RBB_NO_MEMORY = -1
    RBB_TOO_LARGE = -2    # record or batch over the int32 limits of the format
    RBB_BUILT = -3        # already built


cdef class RecordBatchBuilder:
    # Records are written at buf[RBB_HEADER_SIZE:pos]; build() fills buf[:RBB_HEADER_SIZE].
    cdef uint8_t* buf
    cdef Py_ssize_t cap
    cdef Py_ssize_t pos          # bytes used so far, header included (the size estimate)
    cdef Py_ssize_t max_size
    cdef bint owned              # buf is malloc'd by the builder
    cdef PyObject* out           # or a bytes object holding buf (Python appends); else buf
                                 # is caller memory (attach)
    cdef bint built
    cdef int codec               # attributes codec id, 0 = none
    cdef int16_t attrs
    cdef int32_t count
    cdef int nlen                # size of the last record's length varint
    cdef int64_t base_ts, max_ts
    cdef int64_t producer_id
    cdef int16_t producer_epoch
    cdef int32_t base_sequence
    cdef uint8_t* hbuf           # scratch for encoding headers in append()
    cdef Py_ssize_t hcap

    # C API, e.g. for the accumulator with a BufferPool slab:
    #
    #     b = RecordBatchBuilder(batch_size, codec, ...)
    #     b.attach(slab, slab_size)                  # before any append
    #     with nogil:
    #         rc = b.append_raw(ts, key, klen, value, vlen, hdrs, hlen, hcount)
    #         n = b.seal()                           # uncompressed: batch is b.buf[:n]
    #     data = b.build()                           # or, any codec (GIL): a bytes copy
    #
    # The slab stays the caller's: the builder never frees it, and uses it while b.buf == slab.
    # A record that does not fit in it (only possible for the first record, or if max_size >
    # capacity) moves the records to malloc'd memory (owned becomes true). build() leaves the
    # slab unused; after seal() b.buf[:n] must be read before the slab is released.
    # Threads: see the top of this file.

    # Use caller memory of capacity >= RBB_HEADER_SIZE instead of malloc; only before the
    # first append. 0 ok, -1 if records were already appended, it was built, or mem is NULL or
    # too small.
    cdef int attach(self, uint8_t* mem, Py_ssize_t capacity) noexcept nogil
    # Continue in caller memory of capacity >= the bytes written (a bigger slab: the batch
    # grows): they are copied there and max_size becomes capacity. The old memory is the
    # caller's again (freed if the builder owned it). 0, or -1 if built or mem is too small.
    cdef int move_to(self, uint8_t* mem, Py_ssize_t capacity) noexcept nogil
    # Append one record. klen/vlen < 0 = null. headers: hcount headers already encoded
    # (see encode_headers). Returns one of the RBB_* results.
    cdef int append_raw(self, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                        const uint8_t* value, Py_ssize_t vlen,
                        const uint8_t* headers, Py_ssize_t hlen, int32_t hcount) noexcept nogil
    # Uncompressed only: fill the header and CRC in place and mark built. Returns the batch
    # size (the batch is buf[:size]; 0 when empty), or -1 if compressed or already built.
    cdef Py_ssize_t seal(self) noexcept nogil

# Wire encoding of a sequence of (str, bytes-like|None) headers, as append_raw expects.
cdef bytes encode_headers(object headers, int32_t* count)
