# SendChoice (see send_choice.pyx): which batches the Sender sends now: the partition queues as
# the Sender's ready() and drain() see them, the choices made over them, and the chosen batches
# taken; the base class of RecordAccumulator (record_accumulator.pxd), cimported by
# record_accumulator only. Internal: not in kcore's names.
#
# Threads (the one place these rules are written for the fields below; send_choice.pyx points
# here, the accumulator's other fields are in record_accumulator.pxd):
# - _queues, _nqueues, _queues_cap: grown by caller threads (RecordAccumulator._queue) under
#   _queues_lock, and read under it (_scan, _select, _queue_at); _nqueues is also atomic
#   (_queue_count: a count that only grows). The array borrows the queues from the
#   accumulator's _deques, which keeps them while it lives: a pointer read under the lock stays
#   good after it.
# - _drain_index: the Sender thread only (also without the GIL, in _select).
# - _closed, _flushes: atomic; read by the Sender's scan (_sendable) as hints, a stale one
#   delays a batch by one loop.
# - linger_ms, retry_backoff_ms, pool, txn_partitions: set in RecordAccumulator.__init__, then
#   read-only (also without the GIL).
# - _leaders_of, _nleaders, _nentries: the Sender thread only. A queue counts in
#   _nleaders/_nentries only once its leader / TxnPartitionMap entry is set: making one
#   may let another thread add queues.
# - Each queue's leader and TxnPartitionMap entry, read here without the GIL, are set by
#   the Sender thread before the choice (_refresh_leaders, _give_entries).
# - Batches: producer_batch.pxd; queues: partition_queue.pxd; pool: buffer_pool.pxd.
# nogil: _queue_at, _queue_count (any thread); _scan, _select (they take _queues_lock, then each queue's lock around its reads);
#   _scan_queue, _sendable, _drainable (with the queue's lock held); _ready_select: the Sender
#   thread only. Their now_us is the Sender loop's time in microseconds (linger is timed to the
#   microsecond from each batch's creation; ready()/drain() given only ms: the ms's last µs).
from cpython.ref cimport PyObject
from libc.stdint cimport INT64_MAX, int32_t, int64_t

from kcore.buffer_pool cimport BufferPool
from kcore.txn_partition_map cimport TxnPartitionMap
from kcore.fork_impl cimport kc_fork_obj
from kcore.sync_impl cimport kc_mutex_t


# What ready() found without the GIL: distinct ready nodes, queues with no leader, the delay.
ctypedef struct ReadyScan:
    int32_t* ready
    Py_ssize_t nready
    Py_ssize_t* unknown
    Py_ssize_t nunknown
    int64_t next_delay           # microseconds; INT64_MAX: nothing to wait for


# ms in microseconds, saturated at +-INT64_MAX / 4 (ready() may be given times as far off as
# 2**62 ms; differences of two saturated values cannot overflow).
cdef inline int64_t ms_to_us(int64_t ms) noexcept nogil:
    if ms > INT64_MAX // 4000:
        return INT64_MAX // 4
    if ms < -(INT64_MAX // 4000):
        return -(INT64_MAX // 4)
    return ms * 1000


# ready()'s next delay in ms from the scan's microseconds: fractional for the Sender's exact
# time, whole (rounded up, as if timed in ms) when ready() was given ms.
cdef inline object delay_ms(int64_t next_us, bint exact):
    if next_us == INT64_MAX:
        return float("inf")
    return next_us / 1000.0 if exact else (next_us + 999) // 1000


cdef class SendChoice:
    cdef public int64_t linger_ms, retry_backoff_ms
    cdef public BufferPool pool
    cdef public TxnPartitionMap txn_partitions  # idempotence's sequences, or None
    cdef int64_t _flushes
    cdef bint _closed
    cdef Py_ssize_t _drain_index
    # Every PartitionQueue in creation order (borrowed from the accumulator's _deques), for
    # ready() and drain() without the GIL; grown under _queues_lock.
    cdef kc_mutex_t _queues_lock
    cdef kc_fork_obj _fork_obj       # a fork takes _queues_lock first; the child lets it go
    cdef PyObject** _queues
    cdef Py_ssize_t _nqueues, _queues_cap
    cdef object _leaders_of            # the cluster the queues' leaders come from
    cdef Py_ssize_t _nleaders          # queues whose leader was read from it
    cdef Py_ssize_t _nentries          # queues given their TxnPartitionMap entry

    cdef PyObject* _queue_at(self, Py_ssize_t i) noexcept nogil   # borrowed; i < count
    cdef Py_ssize_t _queue_count(self) noexcept nogil
    cdef void _scan(self, Py_ssize_t n, int64_t now_us, const int32_t* busy, Py_ssize_t nbusy,
                    ReadyScan* out) noexcept nogil
    cdef void _scan_queue(self, Py_ssize_t i, int64_t now_us, const int32_t* busy,
                          Py_ssize_t nbusy, ReadyScan* out) noexcept nogil
    # The head batch of dq may go, backoff aside (full, or grown if busy; lingered; pressed).
    cdef bint _sendable(self, PyObject* dq, int64_t now_us, bint busy) noexcept nogil
    # drain()'s choice without the GIL: for each node k, the queues whose head batch may go
    # (one per partition, in round-robin order) land in picks[ends[k-1]:ends[k]].
    cdef void _select(self, Py_ssize_t n, int64_t now_us, const int32_t* nodes,
                      const bint* busy, Py_ssize_t nnodes, PyObject* txn_partitions,
                      Py_ssize_t* scratch, Py_ssize_t* picks, Py_ssize_t* ends) noexcept nogil
    # ready()'s scan, then drain()'s choice for the sendable ready nodes; how many nodes got one.
    cdef Py_ssize_t _ready_select(self, Py_ssize_t n, int64_t now_us, int32_t* nodes,
                                  Py_ssize_t nbusy, Py_ssize_t nsend, ReadyScan* scan,
                                  bint draining, int32_t* ids, bint* busy_,
                                  PyObject* txn_partitions,
                                  Py_ssize_t* idx) noexcept nogil
    cdef bint _drainable(self, PyObject* dq, int64_t now_us, bint busy,
                         PyObject* txn_partitions) noexcept nogil
    # With the GIL, around the choices: each queue's leader and TxnPartitionMap entry set
    # before, the chosen head batches taken after.
    cdef int _refresh_leaders(self, object cluster) except -1
    cdef int _give_entries(self) except -1
    cdef dict _take_picked(self, list order, const Py_ssize_t* idx, Py_ssize_t n,
                           Py_ssize_t max_request_size, int64_t now)
    # The picked queues' head batches, up to max_size bytes: sealed, given sequences.
    cdef list _take(self, const Py_ssize_t* picks, Py_ssize_t npicks, Py_ssize_t max_size,
                    int64_t now)
