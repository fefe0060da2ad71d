"""TxnPartitionMap: the idempotent producer's state, as the Java client keeps it (its
TransactionManager's ProducerIdAndEpoch and TxnPartitionMap, a TxnPartitionEntry per
partition), with the drain gate and the errors send() raises; held as ``txn_partitions``.

It holds the producer id and epoch (InitProducerId) too, not only the partitions; per partition
the next sequence and the batches in flight. A retried batch keeps its sequence and goes out
again only after every in-flight batch with a lower sequence, so the broker sees each
partition's batches in order. A batch that fails
for good after it got a sequence leaves a gap the broker would reject (or, if it expired in
flight, a sequence nobody knows the fate of), so the producer is reset: once nothing is in
flight, its epoch goes up by one (a new producer id from InitProducerId once the epoch is
exhausted) and sequences restart at 0, as Java's idempotent producer does (KIP-360). Batches
waiting to be retried are restamped with the new epoch and fresh sequences.

A batch waiting to be retried may have been written already (its answer was lost with the
connection). Restamped under a new producer id it would be stored twice, so before the reset
such batches are retried under the old id, one per partition at a time: the broker answers
DUPLICATE_SEQUENCE_NUMBER (written), success, or OUT_OF_ORDER_SEQUENCE_NUMBER (not written, nor
anything after it on that partition, since a broker accepts sequences only in order). Only
batches known to be unwritten are restamped (Java's unresolved-sequence tracking, by asking).

A broker with no state for this producer on a partition accepts any first sequence, so until a
partition's first batch is acknowledged under the current producer id, only that batch may be in
flight: otherwise a later batch could be accepted before a retried earlier one.

Every method runs on the Sender thread (drain() calls can_drain/assign under the accumulator's
lock); send() on caller threads only reads fatal_error and send_refusal.

A transactional producer (transactional=True) drains only partitions in the open transaction:
pyprod's TransactionManager adds them once AddPartitionsToTxn is answered (or all of them,
txn_all, under transactions v2) and clears them when the transaction ends.
"""
import bisect
import collections

__all__ = ["TxnPartitionMap", "SEQUENCE_MODULO"]

SEQUENCE_MODULO = 1 << 31


class TxnPartitionMap:
    def __init__(self, max_in_flight, transactional=False):
        self.transactional = transactional  # drain only partitions in the open transaction
        self.txn_all = False  # every partition is (transactions v2: Produce v12 adds it)
        self.send_refusal = None  # what send() raises in the transaction's state, or None
        self._in_txn = set()
        self.producer_id = -1
        self.producer_epoch = -1
        self.max_in_flight = max_in_flight
        self._next_sequence = collections.defaultdict(int)
        self._in_flight = collections.defaultdict(list)  # tp -> batches sorted by sequence
        self._in_flight_count = 0
        self._acked = {}  # tp -> sequence after the last acknowledged batch (this producer id)
        self._reset_pending = False
        self._waiting = set()  # batches with sequences of this producer id waiting to retry
        self._unwritten_from = {}  # tp -> first sequence the broker has not written (this id)
        self.resets = 0  # producer id resets so far (diagnostics and tests)
        self.fatal_error = None

    # -- producer id -------------------------------------------------------------------------
    def has_producer_id(self):
        return self.producer_id >= 0 and not self._reset_pending

    @property
    def reset_pending(self):
        return self._reset_pending

    def needs_producer_id(self):
        """Ask for a (new) producer id now: none yet, or a reset with nothing in flight and no
        batch left whose fate under the old id is unknown."""
        if self.producer_id < 0:
            return True
        return self._reset_pending and self._in_flight_count == 0 and \
            not any(self._must_ask(b) for b in self._waiting)

    def _must_ask(self, batch):
        """Before a reset: may this batch be written under the old producer id already?"""
        if not self.in_current_epoch(batch):
            return False
        first = self._unwritten_from.get(batch.topic_partition)
        return first is None or batch.base_sequence < first

    def not_written(self, batch):
        """The broker refused the batch for its sequence or producer id: neither it nor any later
        batch of its partition is written under this producer id."""
        if self.in_current_epoch(batch):
            tp = batch.topic_partition
            first = self._unwritten_from.get(tp)
            if first is None or batch.base_sequence < first:
                self._unwritten_from[tp] = batch.base_sequence

    def waiting(self, batch):
        """The batch went back to its queue to be retried (or as halves of a split)."""
        if self.in_current_epoch(batch):
            self._waiting.add(batch)

    def set_producer_id(self, producer_id, producer_epoch):
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self._next_sequence.clear()
        self._acked.clear()
        self._waiting.clear()
        self._unwritten_from.clear()
        self._reset_pending = False

    def bump_epoch(self):
        """Reset by bumping the epoch, as Java's idempotent producer does (KIP-360): sequences
        restart at 0 and the broker refuses requests of the old epoch that arrive late (a hung
        leader's), so none lands after newer records. False once the epoch is exhausted: then a
        new producer id is needed."""
        if not self._reset_pending or self.producer_id < 0 or self.producer_epoch >= 0x7FFF:
            return False
        self.set_producer_id(self.producer_id, self.producer_epoch + 1)
        return True

    def request_reset(self):
        """Start over with a new producer id once nothing is in flight."""
        if not self._reset_pending and self.producer_id >= 0:
            self.resets += 1
        self._reset_pending = True

    # -- transactions ------------------------------------------------------------------------
    def add_to_transaction(self, tps):
        """AddPartitionsToTxn answered for these partitions: their batches may go."""
        self._in_txn.update(tps)

    def in_transaction(self, tp):
        return self.txn_all or tp in self._in_txn

    def clear_transaction(self):
        """The transaction ended: no partition is in the next one yet."""
        self._in_txn.clear()
        self.txn_all = False

    # -- sequences ---------------------------------------------------------------------------
    def in_current_epoch(self, batch):
        """True if the batch's sequence was given under the current producer id and epoch."""
        return batch.has_sequence and \
            batch.sequence_epoch == (self.producer_id, self.producer_epoch)

    def can_drain(self, batch):
        if self.transactional and not self.in_transaction(batch.topic_partition):
            return False
        in_flight = self._in_flight.get(batch.topic_partition)
        if self._reset_pending:  # only to ask about a batch of unknown fate, one at a time
            return self.producer_id >= 0 and not in_flight and self._must_ask(batch)
        if self.producer_id < 0:
            return False
        if not in_flight:
            return True
        limit = self.max_in_flight if batch.topic_partition in self._acked else 1
        if len(in_flight) >= limit:
            return False
        if self.in_current_epoch(batch):
            return in_flight[-1].base_sequence < batch.base_sequence
        return True

    def assign(self, batch):
        """Give a drained batch its sequence (unless it is a retry that keeps its own)."""
        tp = batch.topic_partition
        self._waiting.discard(batch)
        if not self.in_current_epoch(batch):
            seq = self._next_sequence[tp]
            batch.build(self.producer_id, self.producer_epoch, seq,  # first: it may raise
                        self.transactional)
            self._next_sequence[tp] = (seq + batch.record_count) % SEQUENCE_MODULO
        in_flight = self._in_flight[tp]
        if not in_flight or in_flight[-1].base_sequence < batch.base_sequence:
            in_flight.append(batch)
        else:
            keys = [b.base_sequence for b in in_flight]
            in_flight.insert(bisect.bisect(keys, batch.base_sequence), batch)
        self._in_flight_count += 1

    def is_first_in_flight(self, batch):
        in_flight = self._in_flight.get(batch.topic_partition)
        return bool(in_flight) and in_flight[0] is batch

    def retry_out_of_order(self, batch):
        """Should an OUT_OF_ORDER_SEQUENCE_NUMBER answer be retried rather than surfaced?

        Yes when something else explains it (Java's rule): the batch is not the next after the
        last acknowledged one (an earlier batch is in flight or waiting for its retry, so this
        one only came out of turn), a reset is already pending (the new producer id renumbers
        it), or its sequence is from an older producer id. Only the batch that was due next is
        refused for real: the broker lost what it had acknowledged."""
        if self._reset_pending or not self.in_current_epoch(batch):
            self.not_written(batch)
            return True
        expected = self._acked.get(batch.topic_partition)
        return expected is not None and batch.base_sequence != expected

    def remove(self, batch, acked=False):
        """The batch's request completed (or it expired): it is no longer in flight."""
        tp = batch.topic_partition
        if acked and self.in_current_epoch(batch):
            end = (batch.base_sequence + batch.record_count) % SEQUENCE_MODULO
            last = self._acked.get(tp)
            # answers from two leaders may cross: keep the furthest (sequences wrap at 2**31)
            if last is None or 0 < (end - last) % SEQUENCE_MODULO < SEQUENCE_MODULO // 2:
                self._acked[tp] = end
        in_flight = self._in_flight.get(tp)
        if in_flight:
            for i, b in enumerate(in_flight):
                if b is batch:
                    del in_flight[i]
                    self._in_flight_count -= 1
                    break

    def failed(self, batch):
        """The batch failed for good: if it held sequences of this producer id, they are a gap
        (or of unknown fate), so reset the producer id."""
        self.remove(batch)
        self._waiting.discard(batch)
        if self.in_current_epoch(batch):
            self.request_reset()
