# cython: binding=False, wraparound=True
"""The send choice: which batches the Sender sends now, as the RecordAccumulator's ready() and
drain() choices (Java's RecordAccumulator.ready and drain), over its partition queues, without
the GIL from the accumulator's _NOGIL_QUEUES queues on: which nodes have a sendable batch and
how long until one may be (_scan), and which queues' head batches each node gets (_select).
SendChoice holds what these read (the queue array under its lock, the settings and hints that
make a batch sendable, the round-robin start) and is the base class of
kcore.record_accumulator.RecordAccumulator, whose ready(), drain() and ready_drain() call in
here (C to C) and then take the chosen batches with the GIL. The pure twin is
kcore/pure/send_choice.py.
Threads: see send_choice.pxd.
"""
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free

from kcore.atomic_impl cimport kc_load_flag, kc_load_i64, kc_load_ssize
from kcore.fork_impl cimport kc_fork_install, kc_fork_track, kc_fork_untrack
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_destroy, kc_mutex_init, kc_mutex_lock, kc_mutex_unlock
from kcore.txn_partition_map cimport TxnPartitionMap

__all__ = []  # internal: RecordAccumulator's base (kcore.record_accumulator)

kc_fork_install()  # at import: after partition_queue's, so a fork locks this first


cdef inline bint _among(int32_t node, const int32_t* nodes, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if nodes[i] == node:
            return True
    return False


cdef inline int64_t _start_us(PyObject* batch) noexcept nogil:
    """When the batch's wait began, in microseconds: its creation (linger counts from it to the
    microsecond), or its last attempt (retry backoff counts from it, in whole ms)."""
    cdef int64_t start = ms_to_us((<ProducerBatch>batch).last_attempt_ms)
    if (<ProducerBatch>batch).attempts == 0:
        return start + (<ProducerBatch>batch).created_frac_us
    return start


cdef Py_ssize_t _sendable_ready(ReadyScan* scan, const int32_t* sendable, Py_ssize_t nsend,
                                const int32_t* busy, Py_ssize_t nbusy, int32_t* ids,
                                bint* busy_) noexcept nogil:
    """The ready nodes that are sendable, ascending, into ids (busy_: each one busy?)."""
    cdef Py_ssize_t i, j, nids = 0
    cdef int32_t node
    for i in range(scan.nready):
        node = scan.ready[i]
        if not _among(node, sendable, nsend):
            continue
        j = nids
        while j > 0 and ids[j - 1] > node:  # insertion sort: a few nodes
            ids[j], busy_[j] = ids[j - 1], busy_[j - 1]
            j -= 1
        ids[j], busy_[j] = node, _among(node, busy, nbusy)
        nids += 1
    return nids


cdef class SendChoice:
    def __cinit__(self, *args, **kwargs):
        if kc_mutex_init(&self._queues_lock) != 0:
            raise MemoryError()
        kc_fork_track(&self._fork_obj, <void*>self, &self._queues_lock, NULL, NULL)

    def __dealloc__(self):
        kc_fork_untrack(&self._fork_obj)
        free(self._queues)
        kc_mutex_destroy(&self._queues_lock)

    cdef PyObject* _queue_at(self, Py_ssize_t i) noexcept nogil:
        cdef PyObject* dq
        kc_mutex_lock(&self._queues_lock)  # a caller may be moving the array
        dq = self._queues[i]
        kc_mutex_unlock(&self._queues_lock)
        return dq

    cdef Py_ssize_t _queue_count(self) noexcept nogil:
        return kc_load_ssize(&self._nqueues)

    # -- ready() ---------------------------------------------------------------------------
    cdef Py_ssize_t _ready_select(self, Py_ssize_t n, int64_t now_us, int32_t* nodes,
                                  Py_ssize_t nbusy, Py_ssize_t nsend, ReadyScan* scan,
                                  bint draining, int32_t* ids, bint* busy_,
                                  PyObject* txn_partitions,
                                  Py_ssize_t* idx) noexcept nogil:
        cdef Py_ssize_t nids = 0
        self._scan(n, now_us, nodes + n, nbusy, scan)
        if draining:
            nids = _sendable_ready(scan, nodes + n + nbusy, nsend, nodes + n, nbusy, ids, busy_)
            if nids:
                self._select(n, now_us, ids, busy_, nids, txn_partitions, idx, idx + n,
                             idx + 2 * n)
        return nids

    cdef void _scan(self, Py_ssize_t n, int64_t now_us, const int32_t* busy, Py_ssize_t nbusy,
                    ReadyScan* out) noexcept nogil:
        cdef Py_ssize_t i
        kc_mutex_lock(&self._queues_lock)
        for i in range(n):
            kc_mutex_lock(&(<PartitionQueue>self._queues[i]).lock)
            self._scan_queue(i, now_us, busy, nbusy, out)
            kc_mutex_unlock(&(<PartitionQueue>self._queues[i]).lock)
        kc_mutex_unlock(&self._queues_lock)

    cdef void _scan_queue(self, Py_ssize_t i, int64_t now_us, const int32_t* busy,
                          Py_ssize_t nbusy, ReadyScan* out) noexcept nogil:
        cdef PyObject* dq = self._queues[i]
        cdef PyObject* first
        cdef int32_t leader = (<PartitionQueue>dq).leader
        cdef int64_t waited, wait
        cdef bint backing_off
        if not (<PartitionQueue>dq).count:
            return
        if leader < 0:
            out.unknown[out.nunknown] = i
            out.nunknown += 1
            return
        if (<PartitionQueue>dq).muted or _among(leader, out.ready, out.nready):
            return
        first = (<PartitionQueue>dq).at(0)
        waited = now_us - _start_us(first)
        backing_off = (<ProducerBatch>first).attempts > 0 and \
            waited < ms_to_us(self.retry_backoff_ms)
        wait = ms_to_us(self.retry_backoff_ms if backing_off else self.linger_ms)
        if not backing_off and self._sendable(dq, now_us, _among(leader, busy, nbusy)):
            out.ready[out.nready] = leader
            out.nready += 1
        elif max(wait - waited, 0) < out.next_delay:
            out.next_delay = max(wait - waited, 0)

    cdef bint _sendable(self, PyObject* dq, int64_t now_us, bint busy) noexcept nogil:
        cdef PyObject* first = (<PartitionQueue>dq).at(0)
        cdef bint full = (<ProducerBatch>first).is_grown_c() if busy else \
            (<ProducerBatch>first).is_full_c()
        return ((<PartitionQueue>dq).count > 1 or full or
                now_us - _start_us(first) >= ms_to_us(self.linger_ms) or
                self.pool.nwaiters_hint() > 0 or kc_load_flag(&self._closed) or
                kc_load_i64(&self._flushes) > 0)

    # -- drain() ---------------------------------------------------------------------------
    cdef void _select(self, Py_ssize_t n, int64_t now_us, const int32_t* nodes,
                      const bint* busy, Py_ssize_t nnodes, PyObject* txn_partitions,
                      Py_ssize_t* scratch, Py_ssize_t* picks, Py_ssize_t* ends) noexcept nogil:
        cdef Py_ssize_t i, j, k, count, first, npicks = 0
        cdef PyObject* dq
        kc_mutex_lock(&self._queues_lock)
        for k in range(nnodes):
            count = 0
            for i in range(n):  # the node's queues, in creation order
                if (<PartitionQueue>self._queues[i]).leader == nodes[k]:
                    scratch[count] = i
                    count += 1
            if count:
                first = self._drain_index % count  # each node starts one queue further on
                self._drain_index += 1
                for j in range(count):
                    i = scratch[(first + j) % count]
                    dq = self._queues[i]
                    kc_mutex_lock(&(<PartitionQueue>dq).lock)
                    if self._drainable(dq, now_us, busy[k], txn_partitions):
                        picks[npicks] = i
                        npicks += 1
                    kc_mutex_unlock(&(<PartitionQueue>dq).lock)
            ends[k] = npicks
        kc_mutex_unlock(&self._queues_lock)

    cdef bint _drainable(self, PyObject* dq, int64_t now_us, bint busy,
                         PyObject* txn_partitions) noexcept nogil:
        cdef PyObject* first
        if not (<PartitionQueue>dq).count or (<PartitionQueue>dq).muted:
            return False
        first = (<PartitionQueue>dq).at(0)
        if kc_load_flag(&(<ProducerBatch>first).appending):
            return False
        if (<ProducerBatch>first).attempts > 0:
            if now_us - _start_us(first) < ms_to_us(self.retry_backoff_ms):
                return False
        elif busy and not self._sendable(dq, now_us, True):
            return False  # it grows meanwhile
        return txn_partitions == NULL or (<TxnPartitionMap>txn_partitions).may_drain_c(
            (<PartitionQueue>dq).entry, first)
