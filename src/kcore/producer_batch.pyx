# cython: binding=False
"""Compiled twin of kcore/pure/producer_batch.py. The batch's records go straight into a
BufferPool slab through the builder's C API; the slab goes back when the batch completes.
An uncompressed batch is sealed in place: its payload is that slab (MemoryRecords), not a copy.
Threads: see producer_batch.pxd."""
cimport cython
from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES, PyBUF_WRITABLE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from kcore.atomic_impl cimport (kc_cas_flag, kc_load_flag, kc_load_ssize, kc_store_flag,
                                kc_store_ssize, kc_xchg_flag)
from kcore.buffer_pool cimport BP_OK, BufferPool
from kcore.ft_impl cimport KC_FT, kc_ft_enter, kc_ft_exit
from kcore.crc cimport crc32c_update
from kcore.future cimport FutureRecordMetadata, ProduceRequestResult, new_future
from kcore.record_batch_builder cimport RBB_APPENDED, RBB_FULL, RecordBatchBuilder

include "_producer_batch.py"  # BATCH_HEADER, record_size_upper_bound, segment reports

__all__ = ["ProducerBatch", "record_size_upper_bound", "restamp", "BATCH_HEADER",
           "piece_errors"]

cdef char* _FORMAT_B = "B"


cdef inline void _put_be(uint8_t* p, uint64_t v, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        p[i] = <uint8_t>(v >> (8 * (n - 1 - i)))


cdef int16_t TRANSACTIONAL_BIT = 0x10  # a record batch's attributes: part of a transaction


def restamp(payload, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence):
    """A built batch with new producer state (and so a new CRC)."""
    cdef bytearray out = bytearray(payload)
    cdef uint8_t* p = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(out)
    if n < BATCH_HEADER:
        raise ValueError("not a record batch: %d bytes" % n)
    _put_be(p + 43, <uint64_t>producer_id, 8)   # producerId, producerEpoch, baseSequence
    _put_be(p + 51, <uint16_t>producer_epoch, 2)
    _put_be(p + 53, <uint32_t>base_sequence, 4)
    _put_be(p + 17, crc32c_update(0, p + 21, n - 21), 4)  # the CRC covers bytes 21..end
    return bytes(out)


@cython.no_gc  # refers only to its BufferPool, which holds no Python objects: no cycles
cdef class MemoryRecords:
    """A sealed uncompressed batch in its BufferPool memory (Java's MemoryRecords over the
    batch's ByteBuffer): read-only bytes-like, written to the socket as they are. The memory
    goes back to the pool once the batch is done with it (release) and no view of it is left."""

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer* view, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("MemoryRecords are read-only")
        kc_ft_enter(&self.lock)  # (never re-entered: no Python code runs in these sections)
        if self.mem == NULL:
            kc_ft_exit(&self.lock)
            raise BufferError("MemoryRecords released")
        self.exports += 1
        kc_ft_exit(&self.lock)
        view.buf = <void*>self.mem
        view.obj = self
        view.len = self.size
        view.readonly = 1
        view.itemsize = 1
        view.format = _FORMAT_B if flags & PyBUF_FORMAT else NULL
        view.ndim = 1
        view.shape = &view.len if flags & PyBUF_ND else NULL
        view.strides = &view.itemsize if flags & PyBUF_STRIDES == PyBUF_STRIDES else NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        kc_ft_enter(&self.lock)
        self.exports -= 1
        if self.exports == 0 and self.released:
            self._free()
        kc_ft_exit(&self.lock)

    cdef void release(self) noexcept:
        kc_ft_enter(&self.lock)
        self.released = True
        if self.exports == 0:
            self._free()
        kc_ft_exit(&self.lock)

    cdef void _free(self) noexcept:
        if self.mem != NULL:
            self.pool.release_raw(self.mem, self.mem_size)
            self.mem = NULL
            self.size = 0

    def __dealloc__(self):
        self._free()

    def __repr__(self):
        return "MemoryRecords(%d bytes)" % self.size


cdef int _append(ProducerBatch b, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                 const uint8_t* value, Py_ssize_t vlen, const uint8_t* headers, Py_ssize_t hlen,
                 int32_t hcount, Py_ssize_t size) noexcept:
    cdef int rc
    if size > (1 << 16):  # big copies run without the GIL (the caller holds the batch)
        with nogil:
            rc = b.builder.append_raw(ts, key, klen, value, vlen, headers, hlen, hcount)
        return rc
    return b.builder.append_raw(ts, key, klen, value, vlen, headers, hlen, hcount)


# no_gc_clear: the cycle collector must not set ``pool`` to None before __dealloc__ gives the
# memory back through it (a batch in a cycle with a user callback, collected undrained).
@cython.no_gc_clear
cdef class ProducerBatch:
    def __init__(self, topic_partition, Py_ssize_t batch_size, compression, int64_t now_ms,
                 max_size=None, int32_t frac_us=0):
        self.topic_partition = topic_partition
        self.builder = RecordBatchBuilder(batch_size, compression or "none")
        self.batch_size = batch_size
        self.max_size = batch_size if max_size is None else max(<Py_ssize_t>max_size, batch_size)
        self.result = ProduceRequestResult(topic_partition)
        self.created_ms = self.last_attempt_ms = now_ms
        self.created_frac_us = frac_us
        self.size = BATCH_HEADER
        self.base_sequence = -1
        self.seq_producer_id = self.seq_producer_epoch = -1

    def __dealloc__(self):
        self.release_memory()

    cdef void attach(self, BufferPool pool, uint8_t* mem, Py_ssize_t size) noexcept:
        self.pool, self.mem, self.mem_size = pool, mem, size
        self.builder.attach(mem, size)
        if size > self.builder.max_size:  # more than batch_size: as if grown to it
            self.builder.max_size = size

    cdef void release_memory(self) noexcept:
        # Held by a writer (appending 1): it frees the memory when done (end_append).
        if kc_cas_flag(&self.appending, HELD, HELD_RELEASED) or \
                kc_load_flag(&self.appending) == HELD_RELEASED:
            return
        if self.mem != NULL:
            self.pool.release_raw(self.mem, self.mem_size)
            self.mem = NULL
        if type(self.payload) is MemoryRecords:
            (<MemoryRecords>self.payload).release()

    cdef Py_ssize_t growth_size(self, Py_ssize_t size) noexcept:
        if kc_load_flag(&self.appending):  # its writer may be copying into the memory
            return 0
        return self._growth(size)

    cdef Py_ssize_t _growth(self, Py_ssize_t size) noexcept:
        cdef Py_ssize_t written, cap
        if kc_load_flag(&self.closed) or self.mem == NULL or self.builder is None or \
                kc_load_flag(&self.appending) == HELD_RELEASED or self.result.done_c():
            return 0
        written = self.builder.pos
        if written + size > self.max_size:
            return 0
        cap = self.mem_size * GROWTH
        if cap < written + size:
            cap = written + size
        return cap if cap < self.max_size else self.max_size

    cdef int grow(self, Py_ssize_t size, bint whole=False) except -1:
        cdef Py_ssize_t cap = self._growth(size)
        cdef uint8_t* mem = NULL
        if cap == 0:
            return 0
        if whole:
            cap = self.max_size
        if self.pool._try_now(cap, &mem) != BP_OK:  # never waits: see grow_into
            cap = self.mem_size * 2 if self.mem_size * 2 < cap else cap  # a smaller step
            if cap < self.builder.pos + size or self.pool._try_now(cap, &mem) != BP_OK:
                return 0
        return self._move_into(mem, cap)

    cdef int grow_into(self, uint8_t* mem, Py_ssize_t cap) except -1:
        if kc_load_flag(&self.appending):  # another thread's writer holds it: leave it
            self.pool.release_raw(mem, cap)
            return 0
        return self._move_into(mem, cap)

    cdef int _move_into(self, uint8_t* mem, Py_ssize_t cap) except -1:
        if cap <= self.mem_size or self._growth(0) == 0 or \
                self.builder.move_to(mem, cap) < 0:
            self.pool.release_raw(mem, cap)
            return 0
        self.pool.release_raw(self.mem, self.mem_size)
        self.mem, self.mem_size = mem, cap
        kc_store_flag(&self.starved, 0)
        return 1

    cdef bint is_full_c(self) noexcept nogil:
        return kc_load_flag(&self.closed) or kc_load_flag(&self.starved) or \
            self.builder is None or kc_load_ssize(&self.builder.pos) >= self.batch_size

    def is_full(self):
        """Sendable by size: closed, or batch_size bytes written (it may still grow)."""
        return self.is_full_c()

    cdef bint is_grown_c(self) noexcept nogil:
        return kc_load_flag(&self.closed) or kc_load_flag(&self.starved) or \
            self.builder is None or kc_load_ssize(&self.builder.pos) >= self.max_size

    def is_grown(self):
        """Done growing: closed, or max_size bytes written (sendable to a busy node)."""
        return self.is_grown_c()

    cdef void end_append(self) noexcept:
        cdef int was
        if KC_FT:
            was = kc_xchg_flag(&self.appending, 0)
        else:  # the GIL orders it against release_memory
            was, self.appending = self.appending, 0
        if was == HELD_RELEASED:
            self.release_memory()

    cdef FutureRecordMetadata append_c(self, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                                       const uint8_t* value, Py_ssize_t vlen,
                                       const uint8_t* headers, Py_ssize_t hlen, int32_t hcount,
                                       int64_t key_size, int64_t value_size,
                                       int64_t header_size, Py_ssize_t size):
        cdef int rc
        if kc_load_flag(&self.closed):
            return None
        rc = _append(self, ts, key, klen, value, vlen, headers, hlen, hcount, size)
        if rc == RBB_FULL and self.grow(size):
            rc = _append(self, ts, key, klen, value, vlen, headers, hlen, hcount, size)
        if rc != RBB_APPENDED:
            if rc != RBB_FULL:
                raise ValueError("record cannot be encoded (error %d)" % rc)
            if self._growth(size):  # sendable as if full; grows if room comes first
                kc_store_flag(&self.starved, 1)
            else:
                kc_store_flag(&self.closed, 1)
            return None
        kc_store_ssize(&self.size, self.size + size)  # read by the Sender's take
        self.record_count += 1
        return new_future(self.result, self.record_count - 1, ts, key_size, value_size,
                          header_size)

    def try_append(self, timestamp_ms, key, value, headers, header_size, size):
        """A future for the record, or None if it does not fit (the first record always fits)."""
        if self.closed or self.appending:
            return None
        if not self.builder.append(timestamp_ms, key, value, headers or ()) and \
                not (self.grow(size) and self.builder.append(timestamp_ms, key, value,
                                                             headers or ())):
            return None
        future = FutureRecordMetadata(
            self.result, self.record_count, timestamp_ms,
            len(key) if key is not None else -1, len(value) if value is not None else -1,
            header_size)
        self.record_count += 1
        self.size += size
        return future

    def estimated_size(self):
        return len(self.payload) if self.payload is not None else self.size

    def close(self):
        """No more appends (the Sender drained it, or the next record did not fit)."""
        kc_store_flag(&self.closed, 1)

    def build(self, int64_t producer_id=-1, int producer_epoch=-1, int32_t base_sequence=-1,
              bint transactional=False):
        """The bytes to send. Built once: a retry resends the same records, restamped only if
        the producer id changed in between. transactional: the batch's attribute bit (set at
        the first build)."""
        kc_store_flag(&self.closed, 1)
        if self.payload is None:
            if transactional:
                self.builder.attrs |= TRANSACTIONAL_BIT
            if producer_id >= 0:
                self.builder.producer_id = producer_id
                self.builder.producer_epoch = producer_epoch
                self.builder.base_sequence = base_sequence
            self.payload = self._seal_in_place()
            if self.payload is None:  # compressed (or off the pool): sent from its own
                self.payload = self.builder.build()  # bytes, so the pool memory can go now
                self.release_memory()
            self.builder = None
        elif producer_id >= 0 and (self.seq_producer_id != producer_id or
                                   self.seq_producer_epoch != producer_epoch or
                                   base_sequence != self.base_sequence):
            records = self.payload
            self.payload = restamp(records, producer_id, producer_epoch, base_sequence)
            if type(records) is MemoryRecords:  # the bytes were copied: the memory can go
                (<MemoryRecords>records).release()
        if producer_id >= 0:
            self.base_sequence = base_sequence
            self.seq_producer_id, self.seq_producer_epoch = producer_id, producer_epoch
        return self.payload

    @property
    def sequence_epoch(self):
        """(producer id, epoch) the sequence was given under, or None."""
        if self.seq_producer_id < 0:
            return None
        return (self.seq_producer_id, self.seq_producer_epoch)

    cdef object _seal_in_place(self):
        """An uncompressed batch still in its pool memory: sealed there and handed over as
        MemoryRecords (no copy), else None."""
        cdef RecordBatchBuilder b = self.builder
        cdef MemoryRecords records
        cdef Py_ssize_t n
        if self.mem == NULL or b.codec != 0 or b.buf != self.mem or b.count == 0:
            return None
        # The GIL is kept: a batch's CRC takes microseconds, and taking the GIL back from a
        # caller thread in a send() loop can take the switch interval (5 ms).
        n = b.seal()
        records = MemoryRecords.__new__(MemoryRecords)
        records.pool, records.mem, records.mem_size, records.size = \
            self.pool, self.mem, self.mem_size, n
        self.mem = NULL
        return records

    @property
    def has_sequence(self):
        return self.base_sequence >= 0

    def split(self, batch_size, compression):
        """Its records in two new batches, first half first (MESSAGE_TOO_LARGE; Java's split)."""
        return _split_in_halves(self, ProducerBatch, batch_size, compression)

    def done(self, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        cdef list segments
        if kc_ft_enter(&self.seg_lock) < 0:
            raise RuntimeError("ProducerBatch.done() re-entered")
        segments, self.segments = self.segments, _TOLD
        kc_ft_exit(&self.seg_lock)
        if segments is not None and segments is not _TOLD:  # before the result: flush()
            _report_segments(self.topic_partition[1], segments, error, record_errors)  # must
        self.result.done(base_offset, log_append_time, error, record_errors)  # see them done

    cdef bint add_segment_c(self, object future, int32_t ordinal, int64_t rank,
                            int64_t count) except -1:
        cdef bint added = False
        segment = (future, ordinal, rank, count)
        if kc_ft_enter(&self.seg_lock) < 0:
            raise RuntimeError("ProducerBatch.add_segment() re-entered")
        if self.segments is not _TOLD and not self.result.done_c():  # (no Python code runs)
            if self.segments is None:
                self.segments = [segment]
            else:
                self.segments.append(segment)
            added = True
        kc_ft_exit(&self.seg_lock)
        return added

    def add_segment(self, future, int32_t ordinal, int64_t rank, int64_t count):
        """Records ordinal.. of this batch are the rank.. records of a send_batch call for this
        partition; False (nothing added) if the batch already completed."""
        return self.add_segment_c(future, ordinal, rank, count)

    def __repr__(self):
        return "ProducerBatch(%s, records=%d, attempts=%d)" % (
            self.topic_partition, self.record_count, self.attempts)
