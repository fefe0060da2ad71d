# ProducerBatch (see producer_batch.pyx): cimported by record_accumulator.
#
# Threads (the one place these rules are written; producer_batch.pyx points here):
# - appending: set and cleared with the GIL by a writer: send() for a record over 64 KiB (its
#   copy), or a send_batch call (its walk). While set, only that writer touches builder and the
#   memory (mem, mem_size), with or without the GIL; every other thread leaves the batch:
#   append_c/try_append, growth_size/grow_into (a waiting send()), drain()'s
#   ReadyDrain._drainable and RecordAccumulator._take, expired_batches. The Sender reads it
#   without the GIL under the queue's lock (ReadyDrain._drainable); a stale read is checked
#   again with the GIL in _take.
# - mem, mem_size: replaced by grow() (the writer, or the appending thread), or by grow_into (a
#   caller holding the GIL, never while appending); given back once by release_memory (GIL). A
#   batch completed while appending defers that to end_append (release_deferred).
# - pool: set by attach, kept until __dealloc__ (no_gc_clear: the collector never clears it).
# - record_count, size, segments: the GIL; a send_batch call adds its records when it lets go.
# - closed, starved, attempts, last_attempt_ms, created_ms, base_sequence, seq_producer_*:
#   written with the GIL (attempts, last_attempt_ms and the sequence by the Sender only); read
#   without the GIL by the Sender's scans under the queue's lock: closed/starved are hints (a
#   stale one delays a batch by one loop), the others have the Sender as their only writer.
# - everything else: the GIL.
# nogil: is_full_c, is_grown_c (any thread; builder.pos is a hint, record_batch_builder.pxd).
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.buffer_pool cimport BufferPool
from kcore.future cimport FutureRecordMetadata, ProduceRequestResult
from kcore.record_batch_builder cimport RecordBatchBuilder


# A sealed uncompressed batch in its pool memory, exported read-only (the batch's payload).
cdef class MemoryRecords:
    cdef BufferPool pool
    cdef uint8_t* mem
    cdef Py_ssize_t mem_size, size, exports
    cdef bint released           # the batch is done with it: free once no view is left

    cdef void release(self) noexcept
    cdef void _free(self) noexcept


cdef class ProducerBatch:
    cdef public object topic_partition
    cdef public RecordBatchBuilder builder
    cdef public ProduceRequestResult result
    cdef public int64_t created_ms, last_attempt_ms
    cdef public int attempts
    cdef public int32_t record_count
    cdef public Py_ssize_t size
    cdef public Py_ssize_t batch_size  # sendable (full) once this many bytes are written
    cdef public Py_ssize_t max_size    # and it may grow up to this many while open
    cdef public object memory          # the twin's PoolBuffer; here the raw slab below
    cdef public object payload
    cdef public int32_t base_sequence
    # the producer id and epoch the sequence was given under (sequence_epoch); -1: none
    cdef readonly int64_t seq_producer_id
    cdef readonly int32_t seq_producer_epoch
    cdef public bint closed
    cdef public bint starved           # a record did not fit and the pool had no room to grow
    cdef public bint appending         # a writer fills it (maybe without the GIL): hands off
    cdef public list segments          # send_batch calls' records in it: (future, ordinal,
                                       # rank, count); told on completion
    cdef bint release_deferred         # completed while appending: free at end_append
    cdef public object drained_ms
    cdef BufferPool pool
    cdef uint8_t* mem
    cdef Py_ssize_t mem_size

    # Put the builder on pool memory (owned by the batch until release_memory).
    cdef void attach(self, BufferPool pool, uint8_t* mem, Py_ssize_t size) noexcept
    cdef void release_memory(self) noexcept
    cdef object _seal_in_place(self)
    # The buffer size a record of size bytes asks to grow to (GROWTH times, at least enough,
    # capped at max_size); 0 if the batch cannot grow to take it (closed, max_size, or
    # ``appending``: another thread's writer holds it).
    cdef Py_ssize_t growth_size(self, Py_ssize_t size) noexcept
    cdef Py_ssize_t _growth(self, Py_ssize_t size) noexcept   # growth_size for its writer
    # The writer (its own append, or the send_batch call that set ``appending``): a record of
    # at most size bytes did not fit: move to a bigger slab from the pool (GROWTH times, else
    # twice, capped at max_size) without waiting. 1 if it did (the record fits now), else 0.
    cdef int grow(self, Py_ssize_t size) except -1
    # Another caller: move into mem (cap bytes from the pool, waited for by the caller): 1, or
    # 0 when the batch can no longer grow or is ``appending`` (mem is given back).
    cdef int grow_into(self, uint8_t* mem, Py_ssize_t cap) except -1
    cdef int _move_into(self, uint8_t* mem, Py_ssize_t cap) except -1
    # Closed, or batch_size bytes written (sendable; it may still grow while open).
    cdef bint is_full_c(self) noexcept nogil
    # Closed, or max_size bytes written: done growing (sendable to a node already busy).
    cdef bint is_grown_c(self) noexcept nogil
    # The writer that set ``appending`` is done (frees the memory if it completed meanwhile).
    cdef void end_append(self) noexcept
    # Note records of a send_batch call (see add_segment); False if the batch completed.
    cdef bint add_segment_c(self, object future, int32_t ordinal, int64_t rank, int64_t count)
    # One record (klen/vlen < 0: null; headers pre-encoded); None if it does not fit.
    cdef FutureRecordMetadata append_c(self, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                                       const uint8_t* value, Py_ssize_t vlen,
                                       const uint8_t* headers, Py_ssize_t hlen, int32_t hcount,
                                       int64_t key_size, int64_t value_size,
                                       int64_t header_size, Py_ssize_t size)


cdef Py_ssize_t size_upper_bound(Py_ssize_t klen, Py_ssize_t vlen, Py_ssize_t hbytes,
                                 Py_ssize_t hcount) noexcept nogil
