"""ProducerBatch: the records bound for one partition, their builder and their shared result."""
import struct
import threading

import kcore.pure.buffer_pool  # noqa: F401  its fork hook first: a fork locks ours before it
from kcore.pure.at_fork import guard_locks
from kcore.pure.crc import crc32c
from kcore.pure.future import FutureRecordMetadata, ProduceRequestResult
from kcore.pure.record_batch_builder import RecordBatchBuilder
from kcore._producer_batch import (BATCH_HEADER, GROWTH, _TOLD, _report_segments,
                                         _split_in_halves, piece_errors,
                                         record_size_upper_bound)

__all__ = ["ProducerBatch", "record_size_upper_bound", "restamp", "BATCH_HEADER",
           "piece_errors"]

_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at offset 43
_CRC = struct.Struct(">I")  # at offset 17, over bytes 21..end


TRANSACTIONAL_BIT = 0x10  # a record batch's attributes: part of a transaction


def restamp(payload, producer_id, producer_epoch, base_sequence):
    """A built batch with new producer state (and so a new CRC)."""
    if len(payload) < BATCH_HEADER:
        raise ValueError("not a record batch: %d bytes" % len(payload))
    out = bytearray(payload)
    _PRODUCER_STATE.pack_into(out, 43, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


_SEGMENTS_LOCK = threading.Lock()
_MEMORY_LOCK = threading.Lock()  # a batch's memory: swapped by grow(), given back once


def _after_fork_in_child():  # the threads that held them at the fork are the parent's
    global _SEGMENTS_LOCK, _MEMORY_LOCK
    _SEGMENTS_LOCK, _MEMORY_LOCK = threading.Lock(), threading.Lock()


guard_locks(lambda: [_SEGMENTS_LOCK, _MEMORY_LOCK], _after_fork_in_child)


def _tell_segments(batch, error, record_errors):
    """Report a completing batch's send_batch records to their calls' futures, once."""
    with _SEGMENTS_LOCK:
        segments, batch.segments = batch.segments, _TOLD
    if segments is not _TOLD and segments:
        _report_segments(batch.topic_partition[1], segments, error, record_errors)


class ProducerBatch:
    __slots__ = ("topic_partition", "builder", "result", "created_ms", "created_frac_us",
                 "last_attempt_ms", "attempts", "record_count", "size", "memory", "payload",
                 "base_sequence", "closed",
                 "sequence_epoch", "drained_ms", "appending", "segments", "batch_size",
                 "max_size", "pool", "starved")

    def __init__(self, topic_partition, batch_size, compression, now_ms, max_size=None,
                 frac_us=0):
        self.topic_partition = topic_partition
        self.builder = RecordBatchBuilder(batch_size, compression or "none")
        self.batch_size = batch_size  # sendable (full) once this many bytes are written
        # ... and it may grow up to max_size while open
        self.max_size = batch_size if max_size is None else max(max_size, batch_size)
        self.pool = None
        self.result = ProduceRequestResult(topic_partition)
        self.created_ms = self.last_attempt_ms = now_ms
        self.created_frac_us = frac_us  # creation's microseconds past created_ms: linger's
        self.attempts = 0
        self.record_count = 0
        self.size = BATCH_HEADER  # an upper bound of the built size, until it is built
        self.memory = None  # the BufferPool allocation this batch accounts for
        self.payload = None  # the built bytes, fixed once the batch is first drained
        self.base_sequence = -1
        self.sequence_epoch = None  # (producer id, epoch) the sequence was given under
        self.closed = False
        self.starved = False  # a record did not fit and the pool had no room to grow
        self.drained_ms = None
        self.appending = False  # a writer (a large append, send_batch) is filling it
        self.segments = None  # send_batch records in it: [(future, ordinal, rank, count)]

    def attach(self, pool, memory):
        """The batch accounts for memory (from pool) until release_memory; a bigger buffer
        than batch_size lets it fill that much at once, as if grown to it."""
        self.pool, self.memory = pool, memory
        self.builder.raise_max_size(len(memory))

    def release_memory(self):
        with _MEMORY_LOCK:
            memory, self.memory = self.memory, None
        if memory is not None:
            self.pool.deallocate(memory)

    def growth_size(self, size):
        """The buffer size a record of size bytes asks to grow to (GROWTH times, at least
        enough, capped at max_size); 0 if the batch cannot grow to take it, or is
        ``appending`` (another thread's writer holds it)."""
        return 0 if self.appending else self._growth(size)

    def _growth(self, size):
        builder, memory = self.builder, self.memory
        if self.closed or memory is None or builder is None or self.result.is_done:
            return 0
        written = builder.size_in_bytes()
        if written + size > self.max_size:
            return 0
        return min(max(GROWTH * len(memory), written + size), self.max_size)

    def grow_into(self, bigger):
        """Another caller: move into bigger (memory from the pool, waited for by the caller):
        True, or False when the batch can no longer grow or is ``appending`` (bigger is given
        back)."""
        with _MEMORY_LOCK:
            memory = self.memory
            if memory is None or len(bigger) <= len(memory) or not self.growth_size(0):
                self.pool.deallocate(bigger)
                return False
            self.memory = bigger
            self.pool.deallocate(memory)
        self.builder.raise_max_size(len(bigger))
        self.starved = False
        return True

    def grow(self, size, whole=False):
        """The writer (its own append, or the send_batch call that set ``appending``): a record
        of at most size bytes did not fit: take a bigger buffer from the pool (GROWTH times its
        size, else twice, capped at max_size) without waiting. True if it did (the record fits
        now). whole: max_size at once (send_batch: one copy of the records, not two)."""
        builder, memory = self.builder, self.memory
        cap = self._growth(size)
        if not cap:
            return False
        if whole:
            cap = self.max_size
        written = builder.size_in_bytes()
        with _MEMORY_LOCK:
            if self.memory is not memory:  # given back meanwhile
                return False
            bigger = self.pool.try_allocate(cap)  # never waits: else the batch is full
            if bigger is None and min(2 * len(memory), cap) >= written + size:
                cap = min(2 * len(memory), cap)  # a smaller step
                bigger = self.pool.try_allocate(cap)
            if bigger is None:
                return False
            self.memory = bigger
            self.pool.deallocate(memory)
        builder.raise_max_size(cap)
        self.starved = False
        return True

    def is_full(self):
        """Sendable by size: closed, or batch_size bytes written (it may still grow)."""
        builder = self.builder  # once: the Sender's build() may drop it meanwhile
        return self.closed or self.starved or builder is None or \
            builder.size_in_bytes() >= self.batch_size

    def is_grown(self):
        """Done growing: closed, or max_size bytes written (sendable to a busy node)."""
        builder = self.builder
        return self.closed or self.starved or builder is None or \
            builder.size_in_bytes() >= self.max_size

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
        self.closed = True

    def build(self, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False):
        """The bytes to send. Built once: a retry resends the same records, restamped only if
        the producer id changed in between. transactional: the batch's attribute bit (set at
        the first build)."""
        self.closed = True
        if self.payload is None:
            if transactional:
                self.builder._attrs |= TRANSACTIONAL_BIT
            compressed = self.builder._codec != 0
            self.payload = self.builder.build()
            self.builder = None
            if compressed:  # sent from its own bytes: the records' pool memory can go now
                self.release_memory()
        if producer_id >= 0:
            self.payload = restamp(self.payload, producer_id, producer_epoch, base_sequence)
            self.base_sequence = base_sequence
            self.sequence_epoch = (producer_id, producer_epoch)
        return self.payload

    @property
    def has_sequence(self):
        return self.base_sequence >= 0

    def split(self, batch_size, compression):
        """Its records in two new batches, first half first (MESSAGE_TOO_LARGE; Java's split)."""
        return _split_in_halves(self, ProducerBatch, batch_size, compression)

    def append_records(self, timestamp_ms, key, value, headers, size):
        """Append without a future (send_batch); False if it does not fit."""
        if not self.builder.append(timestamp_ms, key, value, headers or ()):
            return False
        self.record_count += 1
        self.size += size
        return True

    def add_segment(self, future, ordinal, rank, count):
        """Records ordinal.. of this batch are the rank.. records of a send_batch call for this
        partition; False (nothing added) if the batch already completed."""
        with _SEGMENTS_LOCK:
            if self.segments is _TOLD or self.result.is_done:
                return False
            if self.segments is None:
                self.segments = []
            self.segments.append((future, ordinal, rank, count))
            return True

    def done(self, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        if self.segments is not None:  # before the result: flush() must see them done
            _tell_segments(self, error, record_errors)
        self.result.done(base_offset, log_append_time, error, record_errors)

    def __repr__(self):
        return "ProducerBatch(%s, records=%d, attempts=%d)" % (
            self.topic_partition, self.record_count, self.attempts)
