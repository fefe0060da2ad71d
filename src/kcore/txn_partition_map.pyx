# cython: binding=False
"""Compiled twin of kcore/pure/txn_partition_map.py (see it for the design)."""
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t

from kcore.atomic_impl cimport kc_store_int
from kcore.producer_batch cimport ProducerBatch

__all__ = ["TxnPartitionMap", "SEQUENCE_MODULO"]

SEQUENCE_MODULO = 1 << 31
cdef int64_t MODULO = (<int64_t>1) << 31


# A batch's fields: C fields of a compiled ProducerBatch, else attributes (the pure twin's).
cdef inline int64_t _seq(object b) except? -2:
    if isinstance(b, ProducerBatch):
        return (<ProducerBatch>b).base_sequence
    return b.base_sequence


cdef inline int64_t _count(object b) except? -2:
    if isinstance(b, ProducerBatch):
        return (<ProducerBatch>b).record_count
    return b.record_count


cdef inline object _tp(object b):
    if isinstance(b, ProducerBatch):
        return (<ProducerBatch>b).topic_partition
    return b.topic_partition


cdef inline bint _unknown_fate(PyObject* entry, int64_t seq) noexcept nogil:
    """May the broker have written the batch of this sequence under the current id?"""
    cdef int64_t unwritten = (<TxnPartitionEntry>entry).unwritten_from
    return unwritten < 0 or seq < unwritten


cdef class TxnPartitionEntry:
    def __cinit__(self):
        self.acked = self.unwritten_from = self.last_sequence = -1
        self.in_flight = []

    cdef int _changed(self) except -1:
        self.count = len(self.in_flight)
        self.last_sequence = _seq(self.in_flight[self.count - 1]) if self.count else -1
        return 0


cdef class TxnPartitionMap:
    def __init__(self, max_in_flight, transactional=False):
        self.transactional = transactional
        self.txn_all = False
        self.send_refusal = None
        self._producer_id = self._producer_epoch = -1
        self._epoch_key = (-1, -1)
        self.max_in_flight = max_in_flight
        self._partitions = {}
        self._in_flight_count = 0
        self._reset_pending = False
        self._waiting = set()
        self.resets = 0  # producer id resets so far (diagnostics and tests)
        self.fatal_error = None

    # -- errors read by callers (txn_partition_map.pxd: _err_lock) --------------------------
    cdef object error_c(self, int which):
        with self._err_lock:
            value = self._fatal_error if which == 1 else self._send_refusal
        return value

    cdef int _set_error(self, int which, object value) except -1:
        cdef object old  # dropped once the lock is let go (its finalizer may run code)
        with self._err_lock:
            if which == 1:
                old, self._fatal_error = self._fatal_error, value
            else:
                old, self._send_refusal = self._send_refusal, value
            kc_store_int(&self._errors, (self._fatal_error is not None) |
                         (self._send_refusal is not None) << 1)
        return 0

    @property
    def fatal_error(self):
        return self.error_c(1)

    @fatal_error.setter
    def fatal_error(self, value):
        self._set_error(1, value)

    @property
    def send_refusal(self):
        return self.error_c(2)

    @send_refusal.setter
    def send_refusal(self, value):
        self._set_error(2, value)

    @property
    def producer_id(self):
        return self._producer_id

    @producer_id.setter
    def producer_id(self, int64_t value):
        self._producer_id = value
        self._epoch_key = (value, self._producer_epoch)

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @producer_epoch.setter
    def producer_epoch(self, int value):
        self._producer_epoch = value
        self._epoch_key = (self._producer_id, value)

    cdef TxnPartitionEntry _partition(self, object tp):
        cdef TxnPartitionEntry p = self._partitions.get(tp)
        if p is None:
            p = self._partitions[tp] = TxnPartitionEntry()
        return p

    cdef TxnPartitionEntry partition_entry(self, object tp):
        return self._partition(tp)

    # -- producer id -------------------------------------------------------------------------
    def has_producer_id(self):
        return self._producer_id >= 0 and not self._reset_pending

    @property
    def reset_pending(self):
        return self._reset_pending

    def needs_producer_id(self):
        if self._producer_id < 0:
            return True
        if not self._reset_pending or self._in_flight_count:
            return False
        for b in self._waiting:
            if self._must_ask(b):
                return False
        return True

    cdef bint _must_ask(self, object batch) except -1:
        if not self._in_epoch(batch):
            return False
        cdef TxnPartitionEntry p = self._partition(_tp(batch))
        return _unknown_fate(<PyObject*>p, _seq(batch))

    def not_written(self, batch):
        self._not_written(batch)

    cdef int _not_written(self, object batch) except -1:
        cdef TxnPartitionEntry p
        cdef int64_t seq
        if self._in_epoch(batch):
            p = self._partition(_tp(batch))
            seq = _seq(batch)
            if p.unwritten_from < 0 or seq < p.unwritten_from:
                p.unwritten_from = seq
        return 0

    def waiting(self, batch):
        if self._in_epoch(batch):
            self._waiting.add(batch)

    def set_producer_id(self, int64_t producer_id, int producer_epoch):
        cdef TxnPartitionEntry p
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        self._epoch_key = (producer_id, producer_epoch)
        for p in self._partitions.values():  # sequences restart
            p.next_sequence = 0
            p.acked = p.unwritten_from = -1
        self._waiting.clear()
        self._reset_pending = False

    def bump_epoch(self):
        if not self._reset_pending or self._producer_id < 0 or self._producer_epoch >= 0x7FFF:
            return False
        self.set_producer_id(self._producer_id, self._producer_epoch + 1)
        return True

    def request_reset(self):
        self._request_reset()

    cdef int _request_reset(self) except -1:
        if not self._reset_pending and self._producer_id >= 0:
            self.resets += 1
        self._reset_pending = True
        return 0

    # -- transactions ------------------------------------------------------------------------
    def add_to_transaction(self, tps):
        for tp in tps:
            self._partition(tp).in_txn = True

    def in_transaction(self, tp):
        cdef TxnPartitionEntry p = self._partitions.get(tp)
        return self.txn_all or (p is not None and p.in_txn)

    def clear_transaction(self):
        cdef TxnPartitionEntry p
        for p in self._partitions.values():
            p.in_txn = False
        self.txn_all = False

    # -- sequences ---------------------------------------------------------------------------
    def in_current_epoch(self, batch):
        return self._in_epoch(batch)

    cdef bint _in_epoch(self, object batch) except -1:
        if isinstance(batch, ProducerBatch):
            return self._in_epoch_c(<PyObject*>batch)
        return batch.base_sequence >= 0 and batch.sequence_epoch == self._epoch_key

    cdef bint _in_epoch_c(self, PyObject* batch) noexcept nogil:
        return (<ProducerBatch>batch).base_sequence >= 0 and \
            (<ProducerBatch>batch).seq_producer_id == self._producer_id and \
            (<ProducerBatch>batch).seq_producer_epoch == self._producer_epoch

    def can_drain(self, batch):
        return self._can_drain(batch)

    cdef bint can_drain_c(self, ProducerBatch batch) except -1:
        return self._can_drain(batch)

    cdef bint _can_drain(self, object batch) except -1:
        cdef TxnPartitionEntry p = self._partition(_tp(batch))
        return self._may_drain(<PyObject*>p, _seq(batch), self._in_epoch(batch))

    cdef bint may_drain_c(self, PyObject* entry, PyObject* batch) noexcept nogil:
        return self._may_drain(entry, (<ProducerBatch>batch).base_sequence,
                               self._in_epoch_c(batch))

    cdef bint _may_drain(self, PyObject* entry, int64_t seq, bint in_epoch) noexcept nogil:
        cdef Py_ssize_t n = (<TxnPartitionEntry>entry).count
        if self.transactional and not (self.txn_all or (<TxnPartitionEntry>entry).in_txn):
            return False
        if self._reset_pending:  # only to ask about a batch of unknown fate, one at a time
            return self._producer_id >= 0 and n == 0 and in_epoch and \
                _unknown_fate(entry, seq)              # (_must_ask)
        if self._producer_id < 0:
            return False
        if n == 0:
            return True
        if n >= (self.max_in_flight if (<TxnPartitionEntry>entry).acked >= 0 else 1):
            return False
        if in_epoch:
            return (<TxnPartitionEntry>entry).last_sequence < seq
        return True

    def assign(self, batch):
        self._assign(batch)

    cdef int assign_c(self, ProducerBatch batch) except -1:
        return self._assign(batch)

    cdef int _assign(self, object batch) except -1:
        cdef TxnPartitionEntry p = self._partition(_tp(batch))
        cdef int64_t seq
        cdef Py_ssize_t i = 0, n
        self._waiting.discard(batch)
        if not self._in_epoch(batch):
            seq = p.next_sequence
            batch.build(self._producer_id, self._producer_epoch, seq,  # first: it may raise
                        self.transactional)
            p.next_sequence = <int32_t>((seq + _count(batch)) % MODULO)
        seq = _seq(batch)
        n = len(p.in_flight)
        if n == 0 or _seq(p.in_flight[n - 1]) < seq:
            p.in_flight.append(batch)
        else:
            while i < n and _seq(p.in_flight[i]) <= seq:
                i += 1
            p.in_flight.insert(i, batch)
        p._changed()
        self._in_flight_count += 1
        return 0

    def is_first_in_flight(self, batch):
        cdef TxnPartitionEntry p = self._partitions.get(_tp(batch))
        return p is not None and len(p.in_flight) > 0 and p.in_flight[0] is batch

    def retry_out_of_order(self, batch):
        cdef TxnPartitionEntry p
        if self._reset_pending or not self._in_epoch(batch):
            self._not_written(batch)
            return True
        p = self._partitions.get(_tp(batch))
        return p is not None and p.acked >= 0 and _seq(batch) != p.acked

    def remove(self, batch, acked=False):
        self._remove(batch, acked)

    cdef int remove_c(self, ProducerBatch batch, bint acked) except -1:
        return self._remove(batch, acked)

    cdef int _remove(self, object batch, bint acked) except -1:
        cdef TxnPartitionEntry p = self._partitions.get(_tp(batch))
        cdef int64_t end, ahead
        cdef Py_ssize_t i
        if acked and self._in_epoch(batch):
            if p is None:
                p = self._partition(_tp(batch))
            end = (_seq(batch) + _count(batch)) % MODULO
            ahead = (end - p.acked) % MODULO
            if ahead < 0:
                ahead += MODULO
            # answers from two leaders may cross: keep the furthest (sequences wrap at 2**31)
            if p.acked < 0 or 0 < ahead < MODULO // 2:
                p.acked = end
        if p is not None:
            for i in range(len(p.in_flight)):
                if p.in_flight[i] is batch:
                    del p.in_flight[i]
                    p._changed()
                    self._in_flight_count -= 1
                    break
        return 0

    def failed(self, batch):
        self._remove(batch, False)
        self._waiting.discard(batch)
        if self._in_epoch(batch):
            self._request_reset()
