# ProducerBatch (see producer_batch.pyx): cimported by record_accumulator.
#
# Threads (the one place these rules are written; producer_batch.pyx points here):
# - appending (the hold): 0 free, HELD while one writer fills the batch (a send() append, a
#   send_batch call, with or without the GIL), HELD_RELEASED when it completed meanwhile (its
#   memory goes back at end_append). Taken by PartitionQueue.claim (free-threaded: under the
#   queue's lock, against the Sender's take, which closes the batch under that lock), given
#   back by end_append (an atomic exchange; with the GIL, a plain one). While held only the holder touches builder, mem,
#   mem_size, record_count, size, segments; every other thread leaves the batch (drain(),
#   expiry, a waiting send()'s growth_size/grow_into). Read atomically everywhere.
# - closed, starved: atomic (kc_load_int/kc_store_int): set by the holder (no room), by the
#   Sender's take (under the queue's lock) and by build(); read by the Sender's GIL-free scans
#   under the queue's lock as hints (a stale one delays a batch by one loop).
# - mem, mem_size: replaced by grow()/grow_into()/_move_into (the holder, or a caller whose
#   claim succeeded); given back once by release_memory.
# - segments: under seg_lock (ft_impl.pxd: the GIL does it on GIL builds), add_segment_c
#   against done(), which swaps in _TOLD so that no segment is added after the report.
# - topic_partition, batch_size, max_size, result: set in __init__, then read-only. builder:
#   the holder's; set to None by build() (the Sender, after the take).
# - pool: set by attach, kept until __dealloc__ (no_gc_clear: the collector never clears it).
# - attempts, last_attempt_ms, base_sequence, seq_producer_*, payload, drained_ms: the Sender
#   thread only, once the batch is out of its queue (or at its head, under the queue's lock).
#   created_ms, created_frac_us: set before the batch is in a queue, then read-only.
# - A batch is published by PartitionQueue.insert_c (under the queue's lock): what was written
#   before is seen by every thread that reaches it through the queue.
# nogil: is_full_c, is_grown_c (any thread; builder.pos is atomic, record_batch_builder.pxd).
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.buffer_pool cimport BufferPool
from kcore.ft_impl cimport kc_ft_lock_t
from kcore.future cimport FutureRecordMetadata, ProduceRequestResult
from kcore.record_batch_builder cimport RecordBatchBuilder


cdef enum:
    HELD = 1             # appending: one writer holds the batch
    HELD_RELEASED = 2    # and the batch completed meanwhile


# A sealed uncompressed batch in its pool memory, exported read-only (the batch's payload).
cdef class MemoryRecords:
    cdef BufferPool pool
    cdef uint8_t* mem
    cdef Py_ssize_t mem_size, size, exports
    cdef bint released           # the batch is done with it: free once no view is left
    cdef kc_ft_lock_t lock       # exports, released, mem (the views are the Sender's, the
                                 # release may be a closing thread's); the GIL's job otherwise

    cdef void release(self) noexcept
    cdef void _free(self) noexcept


cdef class ProducerBatch:
    cdef public object topic_partition
    cdef public RecordBatchBuilder builder
    cdef public ProduceRequestResult result
    cdef public int64_t created_ms, last_attempt_ms
    cdef public int32_t created_frac_us  # creation's microseconds past created_ms (linger's)
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
    cdef public bint appending         # the hold: 0, HELD or HELD_RELEASED (above)
    cdef public list segments          # send_batch calls' records in it: (future, ordinal,
                                       # rank, count); told on completion (under seg_lock)
    cdef kc_ft_lock_t seg_lock
    cdef public object drained_ms
    cdef BufferPool pool
    cdef uint8_t* mem
    cdef Py_ssize_t mem_size

    # Put the builder on pool memory (owned by the batch until release_memory); memory above
    # batch_size is room at once, as if the batch grew to it.
    cdef void attach(self, BufferPool pool, uint8_t* mem, Py_ssize_t size) noexcept
    cdef void release_memory(self) noexcept
    cdef object _seal_in_place(self)
    # The buffer size a record of size bytes asks to grow to (GROWTH times, at least enough,
    # capped at max_size); 0 if the batch cannot grow to take it (closed, max_size, or held
    # by a writer). _growth: the same for the holder.
    cdef Py_ssize_t growth_size(self, Py_ssize_t size) noexcept
    cdef Py_ssize_t _growth(self, Py_ssize_t size) noexcept   # growth_size for its writer
    # The writer (its own append, or the send_batch call that set ``appending``): a record of
    # at most size bytes did not fit: move to a bigger slab from the pool (GROWTH times, else
    # twice, capped at max_size) without waiting. 1 if it did (the record fits now), else 0.
    # whole: to max_size at once (a send_batch call with more records to come: one copy of
    # the records, not two).
    cdef int grow(self, Py_ssize_t size, bint whole=*) except -1
    # A caller not holding it: move into mem (cap bytes from the pool, waited for by the
    # caller): 1, or 0 when the batch can no longer grow or is held (mem is given back).
    cdef int grow_into(self, uint8_t* mem, Py_ssize_t cap) except -1
    cdef int _move_into(self, uint8_t* mem, Py_ssize_t cap) except -1
    # Closed, or batch_size bytes written (sendable; it may still grow while open).
    cdef bint is_full_c(self) noexcept nogil
    # Closed, or max_size bytes written: done growing (sendable to a node already busy).
    cdef bint is_grown_c(self) noexcept nogil
    # The holder is done (frees the memory if the batch completed meanwhile).
    cdef void end_append(self) noexcept
    # Note records of a send_batch call (see add_segment); False if the batch completed.
    cdef bint add_segment_c(self, object future, int32_t ordinal, int64_t rank,
                            int64_t count) except -1
    # One record (klen/vlen < 0: null; headers pre-encoded); None if it does not fit. The
    # caller holds the batch (PartitionQueue.claim), or nobody else can reach it yet.
    cdef FutureRecordMetadata append_c(self, int64_t ts, const uint8_t* key, Py_ssize_t klen,
                                       const uint8_t* value, Py_ssize_t vlen,
                                       const uint8_t* headers, Py_ssize_t hlen, int32_t hcount,
                                       int64_t key_size, int64_t value_size,
                                       int64_t header_size, Py_ssize_t size)


cdef enum:
    C_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5   # RECORD_OVERHEAD, for nogil code


# As record_size_upper_bound: hbytes = utf-8 key and value bytes of the headers. Inline: the
# send paths call it once a record.
cdef inline Py_ssize_t size_upper_bound(Py_ssize_t klen, Py_ssize_t vlen, Py_ssize_t hbytes,
                                        Py_ssize_t hcount) noexcept nogil:
    return C_RECORD_OVERHEAD + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0) + \
        hbytes + 10 * hcount
