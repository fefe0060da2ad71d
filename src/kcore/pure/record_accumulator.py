"""RecordAccumulator: a deque of ProducerBatches per partition, fed by send(), drained by the
Sender (seed 000: append / ready / drain).

As in the Java client (3.3+), the accumulator keeps a TopicInfo per topic, and null-key records
are placed there by the built-in uniform sticky partitioner (KIP-794): one partition until about
batch_size bytes went to it and its batches are full, then another with a leader, at random.

SendPath.send is KafkaProducer.send: closed and fork checks, serialize, metadata, partition,
append, and the future back.
"""
import collections
import os
import random
import threading
import time

from kcore.pure.buffer_pool import BufferPool
from kcore.pure.future import TopicPartition
from kcore.pure.murmur import partition_for_key
from kcore.pure.producer_batch import BATCH_HEADER, ProducerBatch, record_size_upper_bound
from kcore.shared.record_accumulator import (_INT32_MAX, _INT64_MAX, ReadyCheckResult,
                                             _as_bytes, _check_headers, _not_in_metadata,
                                             _too_large)
from pyprod.errors import IllegalStateError

__all__ = ["RecordAccumulator", "ReadyCheckResult", "SendPath", "TopicInfo", "fork_generation"]

_fork = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _fork.__setitem__(0, _fork[0] + 1))


def fork_generation():
    """Bumped in every forked child: objects made before a fork can tell they are stale."""
    return _fork[0]


def now_ms():
    return int(time.monotonic() * 1000)


class TopicInfo:
    """One topic as the accumulator sees it: partitions (as of a metadata version), their
    deques, and the sticky partition for null keys."""
    __slots__ = ("topic", "version", "num_partitions", "available", "tps", "deques", "sticky",
                 "produced")

    def __init__(self, topic):
        self.topic = topic
        self.version = -1
        self.num_partitions = 0
        self.available = []
        self.tps = []
        self.deques = []
        self.sticky = -1
        self.produced = 0


class RecordAccumulator:
    def __init__(self, config, metadata, transaction_manager=None, seed=None):
        self.batch_size = config["batch_size"]
        self.linger_ms = config["linger_ms"]
        self.retry_backoff_ms = config["retry_backoff_ms"]
        self.delivery_timeout_ms = config["delivery_timeout_ms"]
        self.compression = config["compression_type"]
        self.pool = BufferPool(config["buffer_memory"], max(self.batch_size, 1))
        self.metadata = metadata
        self.tm = transaction_manager
        self.muted = set()  # partitions with a request in flight, when order needs one at a time
        self._topics = {}
        self._deques = {}  # TopicPartition -> deque of ProducerBatch
        self._lock = threading.RLock()
        self._incomplete = set()
        self._flushes = 0
        self._closed = False
        self._drain_index = 0
        self._rng = random.Random(seed)

    # -- topics and the sticky partitioner --------------------------------------------------
    def topic_info(self, topic):
        """The topic's TopicInfo, current with metadata; None while metadata lacks it."""
        version = self.metadata.version
        info = self._topics.get(topic)
        if info is not None and info.version == version:
            return info if info.num_partitions else None
        cluster = self.metadata.cluster
        with self._lock:
            if info is None:
                info = self._topics.setdefault(topic, TopicInfo(topic))
            parts = cluster.partitions_for_topic(topic)
            count = max(parts) + 1 if parts else 0
            while len(info.deques) < count:
                tp = TopicPartition(topic, len(info.deques))
                info.tps.append(tp)
                info.deques.append(self._deques.setdefault(tp, collections.deque()))
            info.available = sorted(cluster.available_partitions_for_topic(topic) or parts or ())
            info.num_partitions = count
            if info.sticky >= count:
                info.sticky = -1
            info.version = version
        return info if count else None

    def sticky_partition(self, info):
        if info.sticky < 0:
            info.sticky = self._next_partition(info)
        return info.sticky

    def _next_partition(self, info):
        pool = [p for p in info.available if p != info.sticky] or info.available or \
            list(range(info.num_partitions))
        return pool[self._rng.randrange(len(pool))]

    def update_sticky(self, info, partition, appended_bytes):
        """After an append: switch once batch_size bytes went there and its batches are full."""
        if partition != info.sticky:
            return
        info.produced += appended_bytes
        if info.produced >= self.batch_size:
            dq = info.deques[partition]
            if not dq or len(dq) > 1 or dq[-1].closed:
                info.sticky = self._next_partition(info)
                info.produced = 0

    # -- caller threads ---------------------------------------------------------------------
    def append(self, tp, timestamp_ms, key, value, headers, header_size, size, max_block_ms,
               now, abort_on_new_batch=False):
        """(future, batch_is_full, new_batch_created, aborted_for_new_batch). A new batch is
        stamped after any wait for memory (``now`` is the send's start, kept for the API)."""
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques.setdefault(tp, collections.deque())
        with self._lock:
            future = self._try_append(dq, timestamp_ms, key, value, headers, header_size, size)
            if future is not None:
                return future, len(dq) > 1 or dq[-1].closed, False, False
        if abort_on_new_batch:
            return None, False, False, True
        # No room: take memory (may block, without the accumulator lock), then retry.
        memory = self.pool.allocate(max(self.batch_size, BATCH_HEADER + size), max_block_ms)
        try:
            with self._lock:
                if self._closed:
                    raise IllegalStateError("Producer closed while send in progress")
                future = self._try_append(dq, timestamp_ms, key, value, headers, header_size,
                                          size)
                if future is not None:
                    return future, len(dq) > 1 or dq[-1].closed, False, False
                batch, memory = self._new_batch(dq, tp, memory), None
                future = batch.try_append(timestamp_ms, key, value, headers, header_size, size)
                return future, len(dq) > 1 or batch.closed, True, False
        finally:
            if memory is not None:
                self.pool.deallocate(memory)

    def _new_batch(self, dq, tp, memory):
        """A new batch accounting for memory (from the pool), last in dq (lock held)."""
        batch = ProducerBatch(tp, self.batch_size, self.compression, now_ms())
        batch.memory = memory
        dq.append(batch)
        self._incomplete.add(batch)
        return batch

    @staticmethod
    def _try_append(dq, timestamp_ms, key, value, headers, header_size, size):
        if not dq:
            return None
        last = dq[-1]
        future = last.try_append(timestamp_ms, key, value, headers, header_size, size)
        if future is None:
            last.close()
        return future

    # -- the Sender thread ------------------------------------------------------------------
    def ready(self, cluster, now):
        """The nodes with a sendable batch, and how long until the next one may be."""
        ready, unknown = set(), set()
        next_delay = float("inf")
        exhausted = self.pool.waiters > 0
        with self._lock:
            for tp, dq in self._deques.items():
                if not dq:
                    continue
                leader = cluster.leader_for_partition(tp)
                if leader is None or leader < 0:
                    unknown.add(tp.topic)
                    continue
                if leader in ready or tp in self.muted:
                    continue
                batch = dq[0]
                waited = now - batch.last_attempt_ms
                backing_off = batch.attempts > 0 and waited < self.retry_backoff_ms
                wait = self.retry_backoff_ms if backing_off else self.linger_ms
                sendable = (len(dq) > 1 or batch.closed or waited >= wait or exhausted
                            or self._closed or self._flushes > 0)
                if sendable and not backing_off:
                    ready.add(leader)
                else:
                    next_delay = min(next_delay, max(wait - waited, 0))
        return ReadyCheckResult(ready, next_delay, unknown)

    def drain(self, cluster, nodes, max_request_size, now):
        """{node: [batches]}: at most one batch per partition, up to max_request_size per node."""
        with self._lock:
            return {node: self._drain_node(cluster, node, max_request_size, now)
                    for node in nodes}

    def _drain_node(self, cluster, node, max_size, now):
        parts = [tp for tp in self._deques if cluster.leader_for_partition(tp) == node]
        if not parts:
            return []
        start = self._drain_index % len(parts)
        self._drain_index += 1
        size, batches = 0, []
        for tp in parts[start:] + parts[:start]:
            dq = self._deques[tp]
            if not dq or tp in self.muted:
                continue
            first = dq[0]
            if first.appending:
                continue
            if first.attempts > 0 and now - first.last_attempt_ms < self.retry_backoff_ms:
                continue
            if self.tm is not None and not self.tm.can_drain(first):
                continue
            if batches and size + first.estimated_size() > max_size:
                break
            dq.popleft()
            if self.tm is not None:
                self.tm.assign(first)
            else:
                first.build()
            size += len(first.payload)
            first.drained_ms = now
            batches.append(first)
        return batches

    def reenqueue(self, batch, now):
        """Put a batch to retry back at the head of its deque, in sequence order."""
        batch.attempts += 1
        batch.last_attempt_ms = now
        with self._lock:
            self._insert_in_order(self._deques[batch.topic_partition], batch)

    @staticmethod
    def _insert_in_order(dq, batch):
        if not batch.has_sequence:
            dq.appendleft(batch)
            return
        i = 0
        while i < len(dq) and dq[i].has_sequence and dq[i].base_sequence < batch.base_sequence:
            i += 1
        dq.insert(i, batch)

    def split_and_reenqueue(self, batch):
        """The halves of a batch the broker refused as too large, back at the head of its deque
        (Java's splitAndReenqueue); the batch completes once they have (the Sender's part)."""
        halves = batch.split(self.batch_size, self.compression)
        with self._lock:
            dq = self._deques[batch.topic_partition]
            for half in reversed(halves):
                self._insert_in_order(dq, half)
            self._incomplete.update(halves)
        return halves

    def expired_batches(self, now):
        """Queued batches older than delivery_timeout_ms, removed from their deques."""
        expired = []
        with self._lock:
            for dq in self._deques.values():
                while dq and now - dq[0].created_ms >= self.delivery_timeout_ms \
                        and not dq[0].appending:
                    expired.append(dq.popleft())
        return expired

    def next_expiry_delay(self, now):
        with self._lock:
            oldest = min((dq[0].created_ms for dq in self._deques.values() if dq), default=None)
        return float("inf") if oldest is None else max(oldest + self.delivery_timeout_ms - now, 0)

    def complete(self, batch, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        """Finish a batch once: complete its futures and give its memory back."""
        with self._lock:
            if batch not in self._incomplete:
                return
            self._incomplete.discard(batch)
        batch.done(base_offset, log_append_time, error, record_errors)
        if batch.memory is not None:
            self.pool.deallocate(batch.memory)
            batch.memory = None

    # -- flush and close --------------------------------------------------------------------
    def begin_flush(self):
        with self._lock:
            self._flushes += 1

    def end_flush(self):
        with self._lock:
            self._flushes -= 1

    def incomplete_results(self):
        with self._lock:
            return [b.result for b in self._incomplete]

    def has_incomplete(self):
        return bool(self._incomplete)

    def has_undrained(self):
        with self._lock:
            return any(self._deques.values())

    def close(self):
        with self._lock:
            self._closed = True

    def abort_incomplete(self, error, close=True):
        """Fail every batch not completed yet; close=True (the producer is closing) also fails
        current and later memory waits."""
        with self._lock:
            batches = list(self._incomplete)
            for dq in self._deques.values():
                dq.clear()
        for batch in batches:
            self.complete(batch, error=error)
        if close:
            self.pool.close()


class SendPath:
    """KafkaProducer.send, from the closed check to the returned future (the caller thread's
    work in seed 000). The producer binds ``send`` to this object's method."""

    def __init__(self, accumulator, config, wait_on_metadata, wakeup, custom_partitioner=None,
                 on_new_batch=None, transaction_manager=None):
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata  # (topic, partition, max_wait_ms) -> None
        self.wakeup = wakeup
        # A user partitioner: (topic, key, key_bytes, value, value_bytes) -> partition; with
        # on_new_batch(topic, partition), KIP-480: told before a null-key record starts a batch.
        self.custom_partitioner = custom_partitioner
        self.on_new_batch = on_new_batch
        self.tm = transaction_manager
        self.key_serializer = config["key_serializer"]
        self.value_serializer = config["value_serializer"]
        self.max_block_ms = config["max_block_ms"]
        self.max_request_size = config["max_request_size"]
        self.buffer_memory = config["buffer_memory"]
        self.closed = False
        self.fork_generation = fork_generation()

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        """Publish a record; a FutureRecordMetadata. Raises as kafka-python's send() does."""
        self.check_usable()
        if type(topic) is not str or not topic:
            raise TypeError("topic must be a non-empty str, got %r" % (topic,))
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        headers, header_size = _check_headers(headers)
        kb = key if self.key_serializer is None else self.key_serializer(topic, headers, key)
        vb = value if self.value_serializer is None else \
            self.value_serializer(topic, headers, value)
        kb = _as_bytes(kb, "key")
        vb = _as_bytes(vb, "value")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _INT64_MAX:
            raise ValueError("timestamp_ms must be a non-negative int, got %r" % (timestamp_ms,))
        if partition is not None and (type(partition) is not int or
                                      not 0 <= partition <= _INT32_MAX):
            raise ValueError("partition must be a non-negative int, got %r" % (partition,))

        start = now_ms()
        acc = self.accumulator
        info = acc.topic_info(topic)
        if info is None or (partition is not None and partition >= info.num_partitions):
            self.wait_on_metadata(topic, partition, self.max_block_ms)
            info = acc.topic_info(topic)
            if info is None or (partition is not None and partition >= info.num_partitions):
                raise _not_in_metadata(topic, partition)
        remaining = max(0, self.max_block_ms - (now_ms() - start))

        size = record_size_upper_bound(kb, vb, headers)
        if BATCH_HEADER + size > min(self.max_request_size, self.buffer_memory):
            raise _too_large(BATCH_HEADER + size, self.max_request_size, self.buffer_memory)

        sticky = abort = False
        if partition is None:
            if self.custom_partitioner is not None:
                partition = self._custom(topic, key, kb, value, vb, info)
                abort = kb is None and self.on_new_batch is not None
            elif kb is not None:
                partition = partition_for_key(kb, info.num_partitions)
            else:
                partition = acc.sticky_partition(info)
                sticky = True
        future, full, new_batch, aborted = acc.append(
            info.tps[partition], timestamp_ms, kb, vb, headers, header_size, size, remaining,
            start, abort)
        if aborted:
            self.on_new_batch(topic, partition)
            partition = self._custom(topic, key, kb, value, vb, info)
            future, full, new_batch, _ = acc.append(
                info.tps[partition], timestamp_ms, kb, vb, headers, header_size, size,
                remaining, start)
        if sticky:
            acc.update_sticky(info, partition, size)
        if new_batch:  # a batch fills only when the next one starts: one wakeup per batch
            self.wakeup()
        return future

    def _custom(self, topic, key, kb, value, vb, info):
        partition = self.custom_partitioner(topic, key, kb, value, vb)
        if type(partition) is not int or not 0 <= partition < info.num_partitions:
            raise ValueError("Partitioner did not assign a valid partition for topic %s: %r"
                             % (topic, partition))
        return partition

    def check_usable(self):
        if self.closed:
            raise IllegalStateError("KafkaProducer already closed!")
        if self.fork_generation != fork_generation():
            raise IllegalStateError(
                "This KafkaProducer was created in the parent process and cannot be used after "
                "fork(): create a new KafkaProducer in the child process.")
        if self.tm is not None and self.tm.fatal_error is not None:
            raise self.tm.fatal_error
