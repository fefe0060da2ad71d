"""SendChoice, which batches the Sender sends now: the RecordAccumulator's ready() and drain()
choices (Java's RecordAccumulator.ready and drain), made by the Sender thread over the
accumulator's partition queues: which nodes have a sendable batch and how long until one may be
(ready), and which queues' head batches each node gets (drain, one per partition, each node
starting one queue further on). The base class of kcore/pure/record_accumulator.py's
RecordAccumulator (pure twin of send_choice.pyx).

What the choices read is the accumulator's, set in RecordAccumulator.__init__: its queues
(``_deques``) under its ``_lock``, the settings and hints that make a batch sendable
(``linger_ms``, ``retry_backoff_ms``, ``pool``, ``_closed``, ``_flushes``), the round-robin start
(``_drain_index``) and the TxnPartitionMap (``txn_partitions``). This twin takes the chosen
batches in the same pass (``_drain_node``); the compiled one makes the choices without the GIL
and leaves taking them to kcore.record_accumulator.
"""
from kcore._record_accumulator import ReadyCheckResult, _build_failed

__all__ = []  # internal: RecordAccumulator's base (kcore.pure.record_accumulator)


class SendChoice:
    def ready(self, cluster, now, busy=()):
        """The nodes with a sendable batch, and how long until the next one may be. To a node
        in busy (requests in flight) a batch goes once grown to batch_max_size or lingered, not
        at batch_size: a busy producer sends fewer, larger batches (an idle one as Java)."""
        ready, unknown = set(), set()
        next_delay = float("inf")
        with self._lock:
            for tp, dq in self._deques.items():
                if not dq:
                    continue
                leader = cluster.leader_for_partition(tp)
                if leader is None or leader < 0:
                    unknown.add(tp.topic)
                    continue
                if leader in ready or dq.muted:
                    continue
                batch = dq[0]
                waited = now - batch.last_attempt_ms
                backing_off = batch.attempts > 0 and waited < self.retry_backoff_ms
                wait = self.retry_backoff_ms if backing_off else self.linger_ms
                if self._sendable(dq, now, leader in busy) and not backing_off:
                    ready.add(leader)
                else:
                    next_delay = min(next_delay, max(wait - waited, 0))
        return ReadyCheckResult(ready, next_delay, unknown)

    def _sendable(self, dq, now, busy):
        """The head batch of dq may go (backoff aside): a newer batch closed it, it is full
        (grown to batch_max_size for a busy node), lingered, or memory or a flush presses."""
        batch = dq[0]
        full = batch.is_grown() if busy else batch.is_full()
        return (len(dq) > 1 or full or now - batch.last_attempt_ms >= self.linger_ms
                or self.pool.waiters > 0 or self._closed or self._flushes > 0)

    def ready_drain(self, cluster, now, busy, sendable, max_request_size):
        """(ready(), drain() of its ready nodes that are in sendable, in ascending order); the
        compiled twin makes both choices in one section, without the GIL for many queues."""
        result = self.ready(cluster, now, busy)
        nodes = sorted(n for n in result.ready_nodes if n in sendable)
        return result, self.drain(cluster, nodes, max_request_size, now, busy) if nodes else {}

    def drain(self, cluster, nodes, max_request_size, now, busy=()):
        """{node: [batches]}: at most one batch per partition, up to max_request_size per node.
        For a node in busy, only batches sendable on their own (see ready)."""
        with self._lock:
            return {node: self._drain_node(cluster, node, max_request_size, now, node in busy)
                    for node in nodes}

    def _drain_node(self, cluster, node, max_size, now, busy=False):
        parts = [tp for tp in self._deques if cluster.leader_for_partition(tp) == node]
        if not parts:
            return []
        start = self._drain_index % len(parts)
        self._drain_index += 1
        size, batches = 0, []
        for tp in parts[start:] + parts[:start]:
            dq = self._deques[tp]
            if not dq or dq.muted:
                continue
            first = dq[0]
            if first.appending:
                continue
            if first.attempts > 0 and now - first.last_attempt_ms < self.retry_backoff_ms:
                continue
            if busy and first.attempts == 0 and not self._sendable(dq, now, True):
                continue  # it grows meanwhile
            if self.txn_partitions is not None and not self.txn_partitions.can_drain(first):
                continue
            if batches and size + first.estimated_size() > max_size:
                break
            dq.popleft()
            first.close()  # drained: it takes no more records (and never grows)
            try:
                if self.txn_partitions is not None:
                    self.txn_partitions.assign(first)
                else:
                    first.build()
            except Exception as e:  # it fails alone; the Sender goes on
                self.complete(first, error=_build_failed(e))
                continue
            size += len(first.payload)
            first.drained_ms = now
            batches.append(first)
        return batches
