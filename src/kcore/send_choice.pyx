# cython: binding=False, wraparound=True
"""The send choice: which batches the Sender sends now, as the RecordAccumulator's ready() and
drain() choices (Java's RecordAccumulator.ready and drain), over its partition queues, without
the GIL from the accumulator's _NOGIL_QUEUES queues on: which nodes have a sendable batch and
how long until one may be (_scan), and which queues' head batches each node gets (_select).
SendChoice holds what these read (the queue array under its lock, the settings and hints that
make a batch sendable, the round-robin start), and its ready(), drain() and ready_drain() set
the queues' leaders and entries, make the choices (C to C) and then take the chosen batches with
the GIL. It is the base class of kcore.record_accumulator.RecordAccumulator, which keeps the
appends and the batches' completion. The pure twin is kcore/pure/send_choice.py.
Threads: see send_choice.pxd.
"""
from cpython.object cimport PyTypeObject, newfunc
from cpython.ref cimport PyObject
from libc.stdint cimport INT64_MAX, int32_t, int64_t
from libc.stdlib cimport free, malloc

from kcore.atomic_impl cimport kc_load_flag, kc_load_i64, kc_load_ssize
from kcore.fork_impl cimport kc_fork_install, kc_fork_track, kc_fork_untrack
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport ProducerBatch
from kcore.sync_impl cimport kc_mutex_destroy, kc_mutex_init, kc_mutex_lock, kc_mutex_unlock
from kcore.txn_partition_map cimport TxnPartitionMap

include "_record_accumulator.py"  # ReadyCheckResult, the build and too-large errors

__all__ = []  # internal: RecordAccumulator's base (kcore.record_accumulator)

kc_fork_install()  # at import: after partition_queue's, so a fork locks this first

# ready() and drain() let the GIL go from this many queues on. A scan of fewer takes
# microseconds: less than taking the GIL back from a caller thread in a send() loop (up to the
# switch interval).
cdef enum:
    _NOGIL_QUEUES = 512
# ReadyCheckResult(...) would run the namedtuple's Python __new__ (tuple.__new__(cls, t)): made
# in C instead, as kcore.future makes RecordMetadata
cdef newfunc _tuple_new = (<PyTypeObject*>tuple).tp_new
cdef type _ReadyCheckResult = ReadyCheckResult



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

    # -- the Sender's calls, with the GIL around the choices -----------------------------------
    def ready(self, cluster, int64_t now, busy=(), now_us=None):
        """Every queue looked at, without the GIL from _NOGIL_QUEUES queues on (callers append
        meanwhile; queues they add during the scan wait for the next call, as if added just
        after it)."""
        return self.ready_drain(cluster, now, busy, None, 0, now_us)[0]

    def ready_drain(self, cluster, int64_t now, busy, sendable, Py_ssize_t max_request_size,
                    now_us=None):
        """(ready(), drain() of its ready nodes that are in sendable, in ascending order), both
        choices in one section (without the GIL from _NOGIL_QUEUES queues on); None for
        sendable: ready() alone. now_us: the same time in microseconds (the Sender's; linger is
        timed to it, the next delay is then in fractional ms), or None: whole ms."""
        cdef ReadyScan scan
        cdef int64_t us = ms_to_us(now) + 999 if now_us is None else now_us
        cdef Py_ssize_t n, nbusy = len(busy), nsend = 0 if sendable is None else len(sendable)
        cdef Py_ssize_t i, nids = 0
        cdef TxnPartitionMap txn_partitions = self.txn_partitions
        cdef bint draining = sendable is not None
        cdef PyObject* txn_partitions_ = (<PyObject*>txn_partitions
                                          if txn_partitions is not None else NULL)
        self._refresh_leaders(cluster)
        if draining:
            self._give_entries()
        n = self._queue_count()
        cdef int32_t* nodes = <int32_t*>malloc((n + nbusy + nsend + 1) * sizeof(int32_t))
        cdef int32_t* ids = <int32_t*>malloc((n + 1) * sizeof(int32_t))
        cdef bint* busy_ = <bint*>malloc((n + 1) * sizeof(bint))
        cdef Py_ssize_t* idx = <Py_ssize_t*>malloc((3 * n + 1) * sizeof(Py_ssize_t))
        scan.unknown = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
        try:
            if nodes == NULL or ids == NULL or busy_ == NULL or idx == NULL or \
                    scan.unknown == NULL:
                raise MemoryError()
            for i, node in enumerate(busy):
                nodes[n + i] = node
            if draining:
                for i, node in enumerate(sendable):
                    nodes[n + nbusy + i] = node
            scan.ready, scan.nready, scan.nunknown, scan.next_delay = nodes, 0, 0, INT64_MAX
            if n >= _NOGIL_QUEUES:
                with nogil:
                    nids = self._ready_select(n, us, nodes, nbusy, nsend, &scan, draining,
                                              ids, busy_, txn_partitions_, idx)
            else:
                nids = self._ready_select(n, us, nodes, nbusy, nsend, &scan, draining, ids,
                                          busy_, txn_partitions_, idx)
            args = (({nodes[i] for i in range(scan.nready)},
                      delay_ms(scan.next_delay, now_us is not None),
                      {(<PartitionQueue>self._queue_at(scan.unknown[i])).tp[0]
                       for i in range(scan.nunknown)}),)
            result = _tuple_new(_ReadyCheckResult, <PyObject*>args, NULL)
            drained = self._take_picked([ids[i] for i in range(nids)], idx, n,
                                        max_request_size, now) if nids else {}
        finally:
            free(nodes)
            free(ids)
            free(busy_)
            free(idx)
            free(scan.unknown)
        return result, drained

    def drain(self, cluster, nodes, max_request_size, int64_t now, busy=()):
        """The queues are chosen (without the GIL from _NOGIL_QUEUES queues on; callers append
        meanwhile), then their head batches are sealed and given sequences under the GIL."""
        cdef Py_ssize_t n, nnodes = len(nodes), k
        cdef TxnPartitionMap txn_partitions = self.txn_partitions
        cdef PyObject* txn_partitions_ = (<PyObject*>txn_partitions
                                          if txn_partitions is not None else NULL)
        order = list(nodes)
        self._refresh_leaders(cluster)
        self._give_entries()
        n = self._queue_count()
        cdef int32_t* ids = <int32_t*>malloc((nnodes + 1) * sizeof(int32_t))
        cdef bint* busy_ = <bint*>malloc((nnodes + 1) * sizeof(bint))
        cdef Py_ssize_t* idx = <Py_ssize_t*>malloc((2 * n + nnodes + 1) * sizeof(Py_ssize_t))
        try:
            if ids == NULL or busy_ == NULL or idx == NULL:
                raise MemoryError()
            for k in range(nnodes):
                ids[k], busy_[k] = order[k], order[k] in busy
            if n >= _NOGIL_QUEUES:
                with nogil:
                    self._select(n, ms_to_us(now) + 999, ids, busy_, nnodes, txn_partitions_, idx,
                                 idx + n, idx + 2 * n)
            else:
                self._select(n, ms_to_us(now) + 999, ids, busy_, nnodes, txn_partitions_, idx,
                             idx + n, idx + 2 * n)
            return self._take_picked(order, idx, n, max_request_size, now)
        finally:
            free(ids)
            free(busy_)
            free(idx)

    cdef int _give_entries(self) except -1:
        """Queues made since the last drain get their TxnPartitionMap entry."""
        cdef PartitionQueue dq
        cdef Py_ssize_t k
        # Re-read _nqueues each time: making an entry may run the collector, whose finalizers
        # may let a caller add a queue; counting it done would leave its entry NULL.
        while self._nentries < self._queue_count():
            if self.txn_partitions is not None:
                dq = <PartitionQueue>self._queue_at(self._nentries)
                dq.entry_ref = self.txn_partitions.partition_entry(dq.tp)
                dq.entry = <PyObject*>dq.entry_ref
            self._nentries += 1
        return 0

    cdef dict _take_picked(self, list order, const Py_ssize_t* idx, Py_ssize_t n,
                           Py_ssize_t max_request_size, int64_t now):
        """{node: its picked batches (_select's idx), taken}, nodes in order."""
        cdef Py_ssize_t k, start = 0
        cdef dict drained = {}
        for k in range(len(order)):
            drained[order[k]] = self._take(idx + n + start, idx[2 * n + k] - start,
                                           max_request_size, now)
            start = idx[2 * n + k]
        return drained

    cdef list _take(self, const Py_ssize_t* picks, Py_ssize_t npicks, Py_ssize_t max_size,
                    int64_t now):
        cdef ProducerBatch first
        cdef PartitionQueue dq
        cdef Py_ssize_t j, size = 0
        cdef list batches = []
        for j in range(npicks):
            dq = <PartitionQueue>self._queue_at(picks[j])
            first = dq.front()  # only this thread takes batches off a queue
            if first is None or kc_load_flag(&first.appending):
                continue  # a caller took hold of it since the choice
            if batches and size + (len(first.payload) if first.payload is not None
                                   else kc_load_ssize(&first.size)) > max_size:
                break
            if not dq.take_head(first):
                continue  # held since
            try:
                if self.txn_partitions is not None:
                    self.txn_partitions.assign_c(first)
                else:
                    first.build()
            except Exception as e:  # it fails alone; the Sender goes on
                self.complete(first, error=_build_failed(e))
                continue
            size += len(first.payload)
            first.drained_ms = now
            batches.append(first)
        return batches

    cdef int _refresh_leaders(self, object cluster) except -1:
        """Each queue's leader as of cluster (read again only when metadata changed)."""
        cdef PartitionQueue dq
        cdef Py_ssize_t i
        if cluster is not self._leaders_of:
            self._leaders_of, self._nleaders = cluster, 0
        leader_for = cluster.leader_for_partition
        while self._nleaders < self._queue_count():  # callers may add queues meanwhile
            dq = <PartitionQueue>self._queue_at(self._nleaders)
            leader = leader_for(dq.tp)
            dq.leader = -1 if leader is None or leader < 0 else leader
            self._nleaders += 1
        return 0
