"""Idempotent producer state, as the Java client's TransactionManager keeps it (idempotence only).

One producer id and epoch (InitProducerId); per partition the next sequence and the batches in
flight. A retried batch keeps its sequence and goes out again only after every in-flight batch
with a lower sequence, so the broker sees each partition's batches in order. A batch that fails
for good after it got a sequence leaves a gap the broker would reject, so the producer id is
reset (InitProducerId again) and sequences restart at 0, as KIP-360 does.

A broker with no state for this producer on a partition accepts any first sequence, so until a
partition's first batch is acknowledged under the current producer id, only that batch may be in
flight: otherwise a later batch could be accepted before a retried earlier one.
"""
import bisect
import collections
import threading

SEQUENCE_MODULO = 1 << 31


class TransactionManager:
    def __init__(self, max_in_flight):
        self.producer_id = -1
        self.producer_epoch = -1
        self.max_in_flight = max_in_flight
        self._next_sequence = collections.defaultdict(int)
        self._in_flight = collections.defaultdict(list)  # tp -> batches sorted by sequence
        self._acked = set()  # partitions with an acknowledged batch under this producer id
        self._reset_pending = False
        self._lock = threading.Lock()
        self.fatal_error = None

    def has_producer_id(self):
        return self.producer_id >= 0 and not self._reset_pending

    def needs_producer_id(self):
        """Ask for a (new) producer id now: none yet, or a reset whose in-flight batches drained."""
        if self.producer_id < 0:
            return True
        return self._reset_pending and not any(self._in_flight.values())

    def set_producer_id(self, producer_id, producer_epoch):
        with self._lock:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self._next_sequence.clear()
            self._acked.clear()
            self._reset_pending = False

    def request_reset(self):
        """Start over with a new producer id once nothing is in flight."""
        self._reset_pending = True

    def can_drain(self, batch):
        if not self.has_producer_id():
            return False
        tp = batch.topic_partition
        in_flight = self._in_flight[tp]
        if len(in_flight) >= (self.max_in_flight if tp in self._acked else 1):
            return False
        if batch.has_sequence and batch.sequence_epoch == (self.producer_id, self.producer_epoch):
            return all(b.base_sequence < batch.base_sequence for b in in_flight)
        return True

    def assign(self, batch):
        """Give a drained batch its sequence (unless it is a retry that keeps its own)."""
        tp = batch.topic_partition
        with self._lock:
            if not (batch.has_sequence and
                    batch.sequence_epoch == (self.producer_id, self.producer_epoch)):
                seq = self._next_sequence[tp]
                self._next_sequence[tp] = (seq + batch.record_count) % SEQUENCE_MODULO
                batch.build(self.producer_id, self.producer_epoch, seq)
            in_flight = self._in_flight[tp]
            keys = [b.base_sequence for b in in_flight]
            in_flight.insert(bisect.bisect(keys, batch.base_sequence), batch)

    def is_first_in_flight(self, batch):
        in_flight = self._in_flight[batch.topic_partition]
        return bool(in_flight) and in_flight[0] is batch

    def remove(self, batch, acked=False):
        with self._lock:
            if acked and batch.sequence_epoch == (self.producer_id, self.producer_epoch):
                self._acked.add(batch.topic_partition)
            in_flight = self._in_flight[batch.topic_partition]
            if batch in in_flight:
                in_flight.remove(batch)
