"""RecordAccumulator: a deque of ProducerBatches per partition, fed by send(), drained by the
Sender (seed 000: append / ready / drain)."""
import collections
import threading

import kcore
from pyprod.errors import KafkaTimeoutError
from pyprod.producer_batch import BATCH_HEADER, ProducerBatch

ReadyCheckResult = collections.namedtuple(
    "ReadyCheckResult", ["ready_nodes", "next_ready_check_delay_ms", "unknown_leader_topics"])


class RecordAccumulator:
    def __init__(self, config, transaction_manager=None):
        self.batch_size = config["batch_size"]
        self.linger_ms = config["linger_ms"]
        self.retry_backoff_ms = config["retry_backoff_ms"]
        self.delivery_timeout_ms = config["delivery_timeout_ms"]
        self.compression = config["compression_type"]
        self.pool = kcore.BufferPool(config["buffer_memory"], max(self.batch_size, 1))
        self.tm = transaction_manager
        self._deques = {}  # TopicPartition -> deque of ProducerBatch
        self._lock = threading.Lock()
        self._incomplete = set()
        self._flushes = 0
        self._closed = False
        self._drain_index = 0
        self.muted = set()  # partitions with a request in flight, when order needs one at a time

    # -- caller threads ---------------------------------------------------------------------
    def append(self, tp, timestamp_ms, key, value, headers, header_size, size, max_block_ms,
               now_ms, abort_on_new_batch=False):
        """(future, batch_is_full, new_batch_created, aborted_for_new_batch)."""
        dq = self._deques.get(tp)
        if dq is None:
            dq = self._deques.setdefault(tp, collections.deque())
        with self._lock:
            future = self._try_append(dq, timestamp_ms, key, value, headers, header_size, size)
            if future is not None:
                return future, len(dq) > 1 or dq[-1].closed, False, False
        if abort_on_new_batch:
            return None, False, False, True
        # No room: take memory (may block without holding the accumulator lock), then retry.
        memory = self.pool.allocate(max(self.batch_size, BATCH_HEADER + size), max_block_ms)
        try:
            with self._lock:
                if self._closed:
                    raise KafkaTimeoutError("Producer closed while send in progress")
                future = self._try_append(dq, timestamp_ms, key, value, headers, header_size, size)
                if future is not None:
                    self.pool.deallocate(memory)
                    memory = None
                    return future, len(dq) > 1 or dq[-1].closed, False, False
                batch = ProducerBatch(tp, self.batch_size, self.compression, memory, now_ms)
                memory = None
                future = batch.try_append(timestamp_ms, key, value, headers, header_size, size)
                dq.append(batch)
                self._incomplete.add(batch)
                return future, len(dq) > 1 or batch.closed, True, False
        finally:
            if memory is not None:
                self.pool.deallocate(memory)

    @staticmethod
    def _try_append(dq, timestamp_ms, key, value, headers, header_size, size):
        if not dq:
            return None
        last = dq[-1]
        future = last.try_append(timestamp_ms, key, value, headers, header_size, size)
        if future is None:
            last.close()
        return future

    def all_batches_full(self, tp):
        dq = self._deques.get(tp)
        return not dq or len(dq) > 1 or dq[-1].closed

    # -- the Sender thread ------------------------------------------------------------------
    def ready(self, cluster, now_ms):
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
                waited = now_ms - batch.last_attempt_ms
                backing_off = batch.attempts > 0 and waited < self.retry_backoff_ms
                wait = self.retry_backoff_ms if backing_off else self.linger_ms
                sendable = (len(dq) > 1 or batch.closed or waited >= wait or exhausted
                            or self._closed or self._flushes > 0)
                if sendable and not backing_off:
                    ready.add(leader)
                else:
                    next_delay = min(next_delay, max(wait - waited, 0))
        return ReadyCheckResult(ready, next_delay, unknown)

    def drain(self, cluster, nodes, max_request_size, now_ms):
        """{node: [batches]}: at most one batch per partition, up to max_request_size per node."""
        out = {}
        with self._lock:
            for node in nodes:
                out[node] = self._drain_node(cluster, node, max_request_size, now_ms)
        return out

    def _drain_node(self, cluster, node, max_size, now_ms):
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
            if first.attempts > 0 and now_ms - first.last_attempt_ms < self.retry_backoff_ms:
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
            first.drained_ms = now_ms
            batches.append(first)
        return batches

    def reenqueue(self, batch, now_ms):
        """Put a batch to retry back at the head of its deque, in sequence order."""
        batch.attempts += 1
        batch.last_attempt_ms = now_ms
        with self._lock:
            dq = self._deques[batch.topic_partition]
            if not batch.has_sequence:
                dq.appendleft(batch)
                return
            i = 0
            while i < len(dq) and dq[i].has_sequence and dq[i].base_sequence < batch.base_sequence:
                i += 1
            dq.insert(i, batch)

    def expired_batches(self, now_ms):
        """Queued batches older than delivery_timeout_ms, removed from their deques."""
        expired = []
        with self._lock:
            for dq in self._deques.values():
                while dq and now_ms - dq[0].created_ms >= self.delivery_timeout_ms:
                    expired.append(dq.popleft())
        return expired

    def next_expiry_delay(self, now_ms):
        with self._lock:
            oldest = min((dq[0].created_ms for dq in self._deques.values() if dq), default=None)
        return float("inf") if oldest is None else max(oldest + self.delivery_timeout_ms - now_ms, 0)

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

    def abort_incomplete(self, error):
        with self._lock:
            batches = list(self._incomplete)
            for dq in self._deques.values():
                dq.clear()
        for batch in batches:
            self.complete(batch, error=error)
        self.pool.close()

