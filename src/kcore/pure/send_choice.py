"""SendChoice, which batches the Sender sends now: the RecordAccumulator's ready() and drain()
choices (Java's RecordAccumulator.ready and drain), made by the Sender thread over the
accumulator's partition queues: which nodes have a sendable batch and how long until one may be
(ready), and which queues' head batches each node may get (drain, one per partition, each node
starting one queue further on). The base class of kcore/pure/record_accumulator.py's
RecordAccumulator (pure twin of send_choice.pyx); as in the compiled build, its ready(), drain()
and ready_drain() make these choices and take the chosen batches (``_take``).

What the choices read is the accumulator's, set in RecordAccumulator.__init__: its queues
(``_deques``) under its ``_lock`` (the caller holds it), the settings and hints that make a batch
sendable (``linger_ms``, ``retry_backoff_ms``, ``pool``, ``_closed``, ``_flushes``), the
round-robin start (``_drain_index``) and the TxnPartitionMap (``txn_partitions``).
"""
from kcore._record_accumulator import ReadyCheckResult, _build_failed

__all__ = []  # internal: RecordAccumulator's base (kcore.pure.record_accumulator)


def _start_us(batch):
    """When the batch's wait began, in microseconds: its creation (linger counts from it to the
    microsecond), or its last attempt (retry backoff counts from it, in whole ms)."""
    start = batch.last_attempt_ms * 1000
    return start + batch.created_frac_us if batch.attempts == 0 else start


class SendChoice:
    def _ready_choice(self, cluster, now, busy, now_us=None):
        """The nodes with a sendable batch, and how long until the next one may be. To a node
        in busy (requests in flight) a batch goes once grown to batch_max_size or lingered, not
        at batch_size: a busy producer sends fewer, larger batches (an idle one as Java).
        now_us: the same time in microseconds (the Sender's: linger is timed to it, the delay
        is then fractional ms), or None: whole ms (the ms's last microsecond)."""
        us = now * 1000 + 999 if now_us is None else now_us
        ready, unknown = set(), set()
        next_delay = float("inf")
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
            waited = us - _start_us(batch)
            backing_off = batch.attempts > 0 and waited < self.retry_backoff_ms * 1000
            wait = (self.retry_backoff_ms if backing_off else self.linger_ms) * 1000
            if self._sendable(dq, us, leader in busy) and not backing_off:
                ready.add(leader)
            else:
                next_delay = min(next_delay, max(wait - waited, 0))
        if next_delay != float("inf"):  # whole ms, rounded up, when given ms
            next_delay = next_delay / 1000 if now_us is not None else -(-next_delay // 1000)
        return ReadyCheckResult(ready, next_delay, unknown)

    def _sendable(self, dq, now_us, busy):
        """The head batch of dq may go (backoff aside): a newer batch closed it, it is full
        (grown to batch_max_size for a busy node), lingered, or memory or a flush presses."""
        batch = dq[0]
        full = batch.is_grown() if busy else batch.is_full()
        return (len(dq) > 1 or full or now_us - _start_us(batch) >= self.linger_ms * 1000
                or self.pool.waiters > 0 or self._closed or self._flushes > 0)

    def _picks(self, cluster, node, now_us, busy):
        """The queues whose head batch node may get now, in its round-robin order (drain's
        choice; the accumulator takes them in order, up to max_request_size)."""
        parts = [tp for tp in self._deques if cluster.leader_for_partition(tp) == node]
        if not parts:
            return []
        start = self._drain_index % len(parts)
        self._drain_index += 1
        picks = []
        for tp in parts[start:] + parts[:start]:
            dq = self._deques[tp]
            if not dq or dq.muted:
                continue
            first = dq[0]
            if first.appending:
                continue
            if first.attempts > 0 and now_us - _start_us(first) < self.retry_backoff_ms * 1000:
                continue
            if busy and first.attempts == 0 and not self._sendable(dq, now_us, True):
                continue  # it grows meanwhile
            if self.txn_partitions is not None and not self.txn_partitions.can_drain(first):
                continue
            picks.append(dq)
        return picks

    # -- the Sender's calls ---------------------------------------------------------------------
    def ready(self, cluster, now, busy=(), now_us=None):
        return self.ready_drain(cluster, now, busy, None, 0, now_us)[0]

    def ready_drain(self, cluster, now, busy, sendable, max_request_size, now_us=None):
        """(ready(), drain() of its ready nodes that are in sendable, in ascending order); None
        for sendable: ready() alone. The compiled twin makes both choices in one section."""
        with self._lock:
            result = self._ready_choice(cluster, now, busy, now_us)
            nodes = [] if sendable is None else sorted(
                n for n in result.ready_nodes if n in sendable)
            us = now * 1000 + 999 if now_us is None else now_us
            return result, {node: self._take(self._picks(cluster, node, us, node in busy),
                                             max_request_size, now) for node in nodes}

    def drain(self, cluster, nodes, max_request_size, now, busy=()):
        """{node: [batches]}: at most one batch per partition, up to max_request_size per node.
        For a node in busy, only batches sendable on their own (see ready)."""
        with self._lock:
            return {node: self._take(self._picks(cluster, node, now * 1000 + 999, node in busy),
                                     max_request_size, now) for node in nodes}

    def _take(self, picks, max_size, now):
        """The head batches of the picked queues, taken in order up to max_size, sealed and
        given their sequences (a batch that fails to build fails alone)."""
        size, batches = 0, []
        for dq in picks:
            first = dq[0]
            if first.appending:
                continue  # a caller took hold of it since the choice
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
