# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/record_accumulator.py (see it for the design).

The GIL is the lock: between Python calls nothing else runs, and a large record is copied
without it only while its batch is marked ``appending`` (drain() leaves such a batch).
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.buffer_pool cimport (BP_CLOSED, BP_OK, BP_TIMEOUT, BP_TOO_LARGE, BufferPool)
from kcore.builtin_partitioner cimport BuiltInPartitioner
from kcore.future cimport FutureRecordMetadata
from kcore.producer_batch cimport ProducerBatch
from kcore.record_batch_builder cimport RBB_HEADER_SIZE, encode_headers

import collections
import random
import time

from kcore.buffer_pool import BufferPool as _BufferPool
from kcore.future import TopicPartition
from pyprod.errors import IllegalStateError, KafkaTimeoutError

include "shared/record_accumulator.py"  # ReadyCheckResult and the too-large error

__all__ = ["RecordAccumulator", "ReadyCheckResult", "TopicInfo"]

_monotonic = time.monotonic


cdef inline int64_t _now_ms():
    return <int64_t>(_monotonic() * 1000)


cdef class TopicInfo:
    """One topic: partitions (as of a metadata version), their deques, its partitioner."""

    def __init__(self, topic, BuiltInPartitioner partitioner):
        self.topic = topic
        self.version = -1
        self.tps, self.deques = [], []
        self.partitioner = partitioner


cdef void _insert_in_order(object dq, ProducerBatch batch) except *:
    cdef Py_ssize_t i = 0
    if batch.base_sequence < 0:
        dq.appendleft(batch)
        return
    while i < len(dq) and (<ProducerBatch>dq[i]).base_sequence >= 0 and \
            (<ProducerBatch>dq[i]).base_sequence < batch.base_sequence:
        i += 1
    dq.insert(i, batch)


cdef class RecordAccumulator:
    def __init__(self, metadata, transaction_manager=None, *, batch_size, linger_ms,
                 buffer_memory, compression_type, delivery_timeout_ms, retry_backoff_ms,
                 batch_max_size=None, seed=None):
        self.batch_size = batch_size
        self.batch_max_size = batch_size if batch_max_size is None else \
            max(<Py_ssize_t>batch_max_size, self.batch_size)
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression_type = compression_type
        self.pool = _BufferPool(buffer_memory, max(self.batch_size, 1))
        self.metadata = metadata
        self.tm = transaction_manager
        self.muted = set()
        self._topics, self._deques, self._incomplete = {}, {}, set()
        self._seeds = None if seed is None else random.Random(seed)

    # -- topics and their partitioners ------------------------------------------------------
    def topic_info(self, str topic):
        return self._topic_info(topic)

    cdef TopicInfo _topic_info(self, str topic):
        cdef int64_t version = self.metadata.version
        cdef TopicInfo info = self._topics.get(topic)
        cdef int count
        if info is not None and info.version == version:
            return info if info.num_partitions else None
        cluster = self.metadata.cluster
        if info is None:
            info = self._topics.setdefault(topic, TopicInfo(topic, BuiltInPartitioner(
                topic, self.batch_size,
                None if self._seeds is None else self._seeds.getrandbits(64))))
        parts = cluster.partitions_for_topic(topic)
        count = max(parts) + 1 if parts else 0
        while len(info.deques) < count:
            tp = TopicPartition(topic, len(info.deques))
            info.tps.append(tp)
            info.deques.append(self._deques.setdefault(tp, collections.deque()))
        info.num_partitions = count
        info.partitioner._update_partitions(
            sorted(cluster.available_partitions_for_topic(topic) or parts or ()), count)
        info.version = version
        return info if count else None

    def update_partition_info(self, TopicInfo info, int partition, Py_ssize_t appended_bytes):
        self._update_partition_info(info, partition, appended_bytes)

    cdef int _update_partition_info(self, TopicInfo info, int partition,
                                    Py_ssize_t appended_bytes) except -1:
        cdef BuiltInPartitioner partitioner = info.partitioner
        if partitioner._add_produced(partition, appended_bytes):
            dq = info.deques[partition]
            if not dq or len(dq) > 1 or (<ProducerBatch>dq[-1]).is_full_c():  # all full
                partitioner._switch_from(partition)
        return 0

    # -- caller threads ---------------------------------------------------------------------
    def append(self, tp, timestamp_ms, key, value, headers, header_size, size, max_block_ms,
               now, abort_on_new_batch=False):
        """(future, batch_became_full, new_batch_created, aborted_for_new_batch):
        batch_became_full is True for the append that took the batch to batch_size, once."""
        cdef int32_t hcount = 0
        cdef bytes hbytes = encode_headers(headers, &hcount) if headers else None
        if key is not None and not PyBytes_CheckExact(key):
            key = bytes(key)
        if value is not None and not PyBytes_CheckExact(value):
            value = bytes(value)
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques.setdefault(tp, collections.deque())
        return self._append(dq, tp, timestamp_ms, key, value, hbytes, hcount,
                            header_size, size, max_block_ms, abort_on_new_batch)

    cdef tuple _append(self, object dq, object tp, int64_t ts, object key, object value,
                       bytes hbytes, int32_t hcount, int64_t header_size, Py_ssize_t size,
                       double max_block_ms, bint abort_on_new_batch):
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp = NULL
        cdef const uint8_t* hp = NULL
        cdef Py_ssize_t kl = -1, vl = -1, hl = 0, need
        cdef ProducerBatch batch
        cdef FutureRecordMetadata future
        cdef uint8_t* mem = NULL
        cdef int rc
        if key is not None:
            kp, kl = <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
        if value is not None:
            vp, vl = <const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
        if hbytes is not None:
            hp, hl = <const uint8_t*>PyBytes_AS_STRING(hbytes), PyBytes_GET_SIZE(hbytes)
        cdef bint was_full
        if dq:
            batch = dq[-1]
            was_full = batch.is_full_c()
            future = batch.append_c(ts, kp, kl, vp, vl, hp, hl, hcount, kl, vl, header_size,
                                    size)
            if future is not None:
                return future, not was_full and batch.is_full_c(), False, False
        if abort_on_new_batch:
            return None, False, False, True
        # No room: take memory, waiting without the GIL only if the pool is short (letting the
        # GIL go on every new batch hands it to the other caller threads), then retry.
        need = max(self.batch_size, RBB_HEADER_SIZE + size)
        rc = self.pool._try_now(need, &mem)
        if rc != BP_OK:
            with nogil:
                rc = self.pool.acquire_raw(need, max_block_ms, &mem)
        if rc != BP_OK:
            _raise_pool(rc, need, max_block_ms)
        if self._closed:
            self.pool.release_raw(mem, need)
            raise IllegalStateError("Producer closed while send in progress")
        if dq:  # another thread may have made a batch while this one waited
            batch = dq[-1]
            was_full = batch.is_full_c()
            future = batch.append_c(ts, kp, kl, vp, vl, hp, hl, hcount, kl, vl, header_size,
                                    size)
            if future is not None:
                self.pool.release_raw(mem, need)
                return future, not was_full and batch.is_full_c(), False, False
        batch = self._new_batch(dq, tp, mem, need)
        future = batch.append_c(ts, kp, kl, vp, vl, hp, hl, hcount, kl, vl, header_size, size)
        return future, batch.is_full_c(), True, False

    cdef ProducerBatch _new_batch(self, object dq, object tp, uint8_t* mem, Py_ssize_t need):
        cdef ProducerBatch batch = ProducerBatch(tp, self.batch_size, self.compression_type,
                                                 _now_ms(), self.batch_max_size)
        batch.attach(self.pool, mem, need)
        dq.append(batch)
        self._incomplete.add(batch)
        return batch

    # -- the Sender thread: as the twin, over a snapshot (callers may add topics meanwhile) --
    def ready(self, cluster, int64_t now, busy=()):
        cdef ProducerBatch batch
        cdef int64_t waited, wait
        cdef bint backing_off
        ready, unknown = set(), set()
        next_delay = float("inf")
        leader_for = cluster.leader_for_partition
        for tp, dq in list(self._deques.items()):
            if not dq:
                continue
            leader = leader_for(tp)
            if leader is None or leader < 0:
                unknown.add(tp[0])
                continue
            if leader in ready or tp in self.muted:
                continue
            batch = dq[0]
            waited = now - batch.last_attempt_ms
            backing_off = batch.attempts > 0 and waited < self.retry_backoff_ms
            wait = self.retry_backoff_ms if backing_off else self.linger_ms
            if self._sendable(dq, now, leader in busy) and not backing_off:
                ready.add(leader)
            elif max(wait - waited, 0) < next_delay:
                next_delay = max(wait - waited, 0)
        return ReadyCheckResult(ready, next_delay, unknown)

    cdef bint _sendable(self, object dq, int64_t now, bint busy) except -1:
        cdef ProducerBatch batch = dq[0]
        cdef bint full = batch.is_grown_c() if busy else batch.is_full_c()
        return (len(dq) > 1 or full or now - batch.last_attempt_ms >= self.linger_ms
                or self.pool.nwaiters > 0 or self._closed or self._flushes > 0)

    def drain(self, cluster, nodes, max_request_size, int64_t now, busy=()):
        leader_for = cluster.leader_for_partition
        by_node = collections.defaultdict(list)
        for tp in list(self._deques):
            by_node[leader_for(tp)].append(tp)
        return {node: self._drain_node(by_node.get(node, ()), max_request_size, now,
                                       node in busy)
                for node in nodes}

    cdef list _drain_node(self, parts, Py_ssize_t max_size, int64_t now, bint busy):
        cdef ProducerBatch first
        cdef Py_ssize_t size = 0, start, n = len(parts)
        cdef list batches = []
        if not n:
            return batches
        start = self._drain_index % n
        self._drain_index += 1
        for tp in list(parts[start:]) + list(parts[:start]):
            dq = self._deques[tp]
            if not dq or tp in self.muted:
                continue
            first = dq[0]
            if first.appending:
                continue
            if first.attempts > 0 and now - first.last_attempt_ms < self.retry_backoff_ms:
                continue
            if busy and first.attempts == 0 and not self._sendable(dq, now, True):
                continue  # it grows meanwhile
            if self.tm is not None and not self.tm.can_drain_c(first):
                continue
            if batches and size + first.estimated_size() > max_size:
                break
            if dq[0] is not first or first.appending:  # changed during the calls above
                continue
            dq.popleft()
            first.closed = True
            if self.tm is not None:
                self.tm.assign_c(first)
            else:
                first.build()
            size += len(first.payload)
            first.drained_ms = now
            batches.append(first)
        return batches

    def reenqueue(self, ProducerBatch batch, int64_t now):
        batch.attempts += 1
        batch.last_attempt_ms = now
        _insert_in_order(self._deques[batch.topic_partition], batch)

    def split_and_reenqueue(self, ProducerBatch batch):
        """The halves of a batch the broker refused as too large, back at the head of its deque
        (Java's splitAndReenqueue); the batch completes once they have (the Sender's part)."""
        halves = batch.split(self.batch_size, self.compression_type)
        dq = self._deques[batch.topic_partition]
        for half in reversed(halves):
            _insert_in_order(dq, half)
        self._incomplete.update(halves)
        return halves

    def expired_batches(self, int64_t now):
        cdef list expired = []
        for dq in list(self._deques.values()):
            while dq and now - (<ProducerBatch>dq[0]).created_ms >= self.delivery_timeout_ms \
                    and not (<ProducerBatch>dq[0]).appending:
                expired.append(dq.popleft())
        return expired

    def next_expiry_delay(self, int64_t now):
        oldest = None
        for dq in list(self._deques.values()):
            if dq and (oldest is None or (<ProducerBatch>dq[0]).created_ms < oldest):
                oldest = (<ProducerBatch>dq[0]).created_ms
        return float("inf") if oldest is None else max(oldest + self.delivery_timeout_ms - now, 0)

    def complete(self, ProducerBatch batch, base_offset=-1, log_append_time=-1, error=None,
                 record_errors=None):
        if batch not in self._incomplete:
            return
        self._incomplete.discard(batch)
        batch.done(base_offset, log_append_time, error, record_errors)
        batch.release_memory()

    # -- flush and close: the twin's, over this class's state --------------------------------
    def begin_flush(self):
        self._flushes += 1

    def end_flush(self):
        self._flushes -= 1

    def incomplete_results(self):
        return [(<ProducerBatch>b).result for b in list(self._incomplete)]

    def has_incomplete(self):
        return bool(self._incomplete)

    def has_undrained(self):
        return any(list(self._deques.values()))

    def close(self):
        self._closed = True

    def abort_incomplete(self, error, close=True):
        """Fail every batch not completed yet; close=True (the producer is closing) also fails
        current and later memory waits."""
        batches = list(self._incomplete)
        for dq in list(self._deques.values()):
            dq.clear()
        for batch in batches:
            self.complete(batch, error=error)
        if close:
            self.pool.close()


cdef int _raise_pool(int rc, Py_ssize_t need, double max_block_ms) except -1:
    if rc == BP_TIMEOUT:
        raise KafkaTimeoutError("Failed to allocate memory within the configured max blocking "
                                "time %d ms." % max_block_ms)
    if rc == BP_CLOSED:
        raise IllegalStateError("Producer closed while allocating memory")
    if rc == BP_TOO_LARGE:
        raise _too_large(need, need, 0)
    raise MemoryError()
