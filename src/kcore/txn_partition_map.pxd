# TxnPartitionMap (see txn_partition_map.pyx): cimported by record_accumulator, send_choice,
# send_path and sender_loop; held as `txn_partitions` everywhere.
#
# Threads (the one place these rules are written):
# - Written by the Sender thread alone, with the GIL (drain()'s assign, response handling,
#   producer id changes), no lock; but fatal_error and send_refusal, below.
# - Read without the GIL by the Sender thread only (drain()'s choice from _NOGIL_QUEUES queues
#   on: SendChoice._select -> _drainable -> may_drain_c): _producer_id, _producer_epoch,
#   _reset_pending, max_in_flight; a TxnPartitionEntry's count, acked, last_sequence,
#   unwritten_from; the batch's base_sequence, seq_producer_id, seq_producer_epoch (also written
#   by the Sender only, once the batch is queued). No lock: the reader is the one writer.
# - TxnPartitionEntry.count and last_sequence mirror in_flight for those readers: _changed()
#   after every change to in_flight. _partitions keeps each TxnPartitionEntry for good, so a
#   borrowed entry stays valid while the map lives.
# - Transactions: a TxnPartitionEntry's in_txn and txn_all are written by the Sender thread
#   alone, with the GIL (pyprod's TransactionManager, on the Sender thread), and read without
#   the GIL by the Sender only (_may_drain). transactional is set in __init__.
# - fatal_error and send_refusal (properties over _fatal_error, _send_refusal): written by any
#   thread (the Sender; pyprod's TransactionManager, under its own lock, on each state change)
#   and read by any thread (SendPath._check_usable on callers, the Sender). Both sides hold
#   _err_lock (a PyMutex, a leaf: nothing else is taken and no Python code runs under it) to
#   load or swap the field; a reader leaves with a new reference, a writer drops the old value
#   after letting the lock go. _errors (atomic, a hint: bit 1 fatal_error, bit 2 send_refusal
#   is set) lets send() skip the lock while neither is set.
# - resets and max_in_flight: the Sender thread only (metrics do not read them).
# nogil: may_drain_c, _may_drain, _in_epoch_c: the Sender thread; entry a non-NULL
#   TxnPartitionEntry of the batch's partition (partition_entry), batch a compiled
#   ProducerBatch its caller keeps alive (its queue's lock held).
cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t

from kcore.atomic_impl cimport kc_load_int
from kcore.producer_batch cimport ProducerBatch


# One partition's sequence state under the current producer id (Java's TxnPartitionEntry).
# Kept for good once made (a new producer id resets it), so an accumulator queue can hold it.
cdef class TxnPartitionEntry:
    cdef int32_t next_sequence
    cdef int64_t acked           # sequence after the last acknowledged batch; -1: none yet
    cdef int64_t unwritten_from  # first sequence the broker has not written; -1: unknown
    cdef list in_flight          # batches sorted by sequence
    cdef Py_ssize_t count        # len(in_flight), and the last one's sequence, for nogil
    cdef int64_t last_sequence   # readers
    cdef bint in_txn             # in the open transaction (AddPartitionsToTxn answered)

    cdef int _changed(self) except -1   # after in_flight changed


cdef class TxnPartitionMap:
    cdef int64_t _producer_id
    cdef int _producer_epoch
    cdef tuple _epoch_key        # (producer id, epoch), as batches' sequence_epoch
    cdef public int max_in_flight
    cdef public int64_t resets
    cdef public bint transactional  # drain only partitions in the open transaction
    cdef public bint txn_all        # every partition is (transactions v2: Produce v12 adds it)
    cdef object _fatal_error        # fatal_error: the idempotent producer's fatal error, or None
    cdef object _send_refusal       # send_refusal: what send() raises in the transaction's
                                    # state, or None
    cdef int _errors                # atomic: bit 1 _fatal_error, bit 2 _send_refusal is set
    cdef cython.pymutex _err_lock
    cdef dict _partitions        # tp -> TxnPartitionEntry
    cdef Py_ssize_t _in_flight_count
    cdef bint _reset_pending
    cdef set _waiting            # batches with sequences of this producer id waiting to retry

    cdef TxnPartitionEntry _partition(self, object tp)
    cdef bint _in_epoch(self, object batch) except -1
    cdef bint _must_ask(self, object batch) except -1
    cdef int _not_written(self, object batch) except -1
    cdef int _request_reset(self) except -1
    cdef bint _can_drain(self, object batch) except -1
    cdef int _assign(self, object batch) except -1
    cdef int _remove(self, object batch, bint acked) except -1
    # For other kernels: as can_drain, assign and remove, reading the batch's C fields.
    cdef bint can_drain_c(self, ProducerBatch batch) except -1
    # can_drain without the GIL (see the top of this file for who may call it and with what).
    cdef bint may_drain_c(self, PyObject* entry, PyObject* batch) noexcept nogil
    cdef bint _may_drain(self, PyObject* entry, int64_t seq, bint in_epoch) noexcept nogil
    cdef bint _in_epoch_c(self, PyObject* batch) noexcept nogil
    cdef TxnPartitionEntry partition_entry(self, object tp)
    cdef int assign_c(self, ProducerBatch batch) except -1
    cdef int remove_c(self, ProducerBatch batch, bint acked) except -1
    # fatal_error (which=1) or send_refusal (2): a new reference, under _err_lock.
    cdef object error_c(self, int which)
    cdef int _set_error(self, int which, object value) except -1

    # Is fatal_error or send_refusal set? A hint (atomic, no lock): error_c() says which.
    cdef inline bint errors_hint(self) noexcept nogil:
        return kc_load_int(&self._errors) != 0
