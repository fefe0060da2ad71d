# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/batch_send.py (see it for the design).

The call's columns are read first, with the GIL, by kcore.batch_columns (Arrow columns from
their buffers, Python sequences as a pointer and a length per record; read_columns, C to C).
The walk over the records runs without the GIL: it partitions (explicit, murmur2, sticky) and
appends straight into the batches the call holds (marked ``appending``: drain() and other
senders leave them), and takes the GIL only to hold another batch, to switch the sticky
partition and at the end. No Python object is made per record of an Arrow column.
Threads: see batch_send.pxd.
"""
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memset

from kcore.atomic_impl cimport kc_load_flag, kc_store_flag, kc_store_ssize
from kcore.batch_columns cimport Columns, free_columns, next_record, read_columns
from kcore.buffer_pool cimport BP_OK, BP_WOULD_BLOCK, BufferPool
from kcore.builtin_partitioner cimport BuiltInPartitioner, partition_for_key
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport ProducerBatch, size_upper_bound
from kcore.selector cimport Waker
from kcore.record_accumulator cimport RecordAccumulator, TopicInfo, _raise_pool
from kcore.record_batch_builder cimport RBB_APPENDED, RBB_FULL, RBB_HEADER_SIZE, RecordBatchBuilder

from kcore.batch_columns import check_columns, prepare_rows  # the shared input checks
from kcore.future import BatchFuture
from kcore.record_accumulator import _too_large
from kcore.send_path import _not_in_metadata
from kcore.errors import IllegalStateError, KafkaError, KafkaTimeoutError

__all__ = ["BatchSendPath", "prepare_rows"]

cdef extern from "clock_impl.h" nogil:
    int64_t kc_wall_ms()

cdef enum:
    WALK_DONE = 0
    WALK_NO_BATCH = 1     # no batch held for stop_part
    WALK_FULL = 2         # the held batch of stop_part is full
    WALK_NO_STICKY = 3    # no sticky partition chosen yet
    WALK_AFTER = 4        # after the record: its batch became sendable (stop_full) and/or
                          # the sticky partition is due to change (stop_switch)
    WALK_ERROR = 5        # the builder refused a record (stop_rc)
    WALK_WIDEN = 6        # the sticky partition (another thread's) is past the call's slots


# ---- the walk ----

cdef class _Placement:
    """The partition of each record of a call (-1: not appended, -2: refused), kept for the
    future: failed (partition, rank) ranges back to record indices, in one pass."""
    cdef int32_t* parts          # a record's partition; -1 not appended, -2 refused
    cdef Py_ssize_t n

    def __cinit__(self, Py_ssize_t n):
        self.n = n
        self.parts = <int32_t*>malloc(max(n, 1) * sizeof(int32_t))
        if self.parts == NULL:
            raise MemoryError()
        memset(self.parts, 0xFF, n * sizeof(int32_t))  # every one -1

    def __dealloc__(self):
        free(self.parts)

    def locate(self, ranges):
        cdef dict by_part = {}
        cdef dict seen = {}
        cdef Py_ssize_t i, j
        cdef int32_t part, top = -1
        cdef int64_t* rank
        cdef Py_ssize_t* at
        cdef list lst, out = []
        for r in ranges:
            by_part.setdefault(r[0], []).append(r[1:])
        for p, lst in by_part.items():
            lst.sort(key=lambda r: r[0])
            top = max(top, p)
        rank = <int64_t*>calloc(top + 1, sizeof(int64_t))
        at = <Py_ssize_t*>calloc(top + 1, sizeof(Py_ssize_t))
        try:
            if rank == NULL or at == NULL:
                raise MemoryError()
            for i in range(self.n):
                part = self.parts[i]
                if part < 0 or part > top:
                    continue
                rank[part] += 1
                lst = by_part.get(part)
                if lst is None:
                    continue
                j = at[part]
                while j < len(lst) and lst[j][0] + lst[j][1] <= rank[part] - 1:
                    j += 1
                at[part] = j
                if j < len(lst) and lst[j][0] <= rank[part] - 1:
                    start, count, error, record_errors = lst[j]
                    exc = error if error is not None else \
                        (record_errors or {}).get(rank[part] - 1)
                    if exc is not None:
                        out.append((i, exc))
        finally:
            free(rank)
            free(at)
        return out


cdef class _Call:
    """One send_batch call: its columns, the batches it holds, its walk."""
    cdef object path, future
    cdef Waker waker             # the Sender's (C to C), or None: path.wakeup() is called
    cdef RecordAccumulator acc
    cdef TopicInfo info
    cdef BuiltInPartitioner partitioner  # the topic's, for null keys
    cdef _Placement placed
    cdef list keep               # whatever the column pointers point into
    cdef Columns cols            # the columns, as the walk reads them (batch_columns.pxd)
    cdef int64_t now
    cdef Slot* slots
    cdef int nparts              # slots (grown when the topic grows under the call)
    cdef int key_parts           # the partition count keys are placed by (the call's first)
    cdef Py_ssize_t n, i, appended
    cdef Py_ssize_t limit
    cdef bint rolled             # the sticky partition's batch filled since it was chosen
    cdef int stop_part           # where the walk stopped, and the record's size estimate
    cdef Py_ssize_t stop_size
    cdef int stop_rc
    cdef bint stop_full, stop_switch
    cdef Py_ssize_t* too_large   # (index, size) pairs of records over the size limit
    cdef Py_ssize_t ntoo_large, cap_too_large

    def __cinit__(self):
        self.keep = []

    def __dealloc__(self):
        free_columns(&self.cols)
        free(self.too_large)
        if self.slots != NULL:
            for i in range(self.nparts):
                if self.slots[i].batch != NULL:
                    Py_DECREF(<object>self.slots[i].batch)
            free(self.slots)

    # -- the walk ---------------------------------------------------------------------------
    cdef int _walk(self) noexcept nogil:
        """Append records from self.i on until one needs the GIL; a WALK_* code."""
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp
        cdef const uint8_t* hp = NULL
        cdef Py_ssize_t kl = -1, vl, hl = 0, size, vci, vpos, kci = 0, kpos = 0, i = self.i
        cdef int32_t hc = 0
        cdef int64_t hraw = 0, ts
        cdef int part, rc
        cdef bint sticky, switch, full
        cdef Slot* slot
        cdef int32_t* parts = self.placed.parts
        while i < self.n:
            vci, vpos = self.cols.values.ci, self.cols.values.pos
            next_record(&self.cols.values, &vp, &vl)
            if self.cols.has_keys:
                kci, kpos = self.cols.keys.ci, self.cols.keys.pos
                next_record(&self.cols.keys, &kp, &kl)
            if self.cols.hoff != NULL:
                hp = self.cols.hdata + self.cols.hoff[i]
                hl = <Py_ssize_t>(self.cols.hoff[i + 1] - self.cols.hoff[i])
                hc, hraw = self.cols.hcount[i], self.cols.hraw[i]
            size = size_upper_bound(kl, vl, hraw, hc)
            if RBB_HEADER_SIZE + size > self.limit:
                if self._refuse(i, size) < 0:
                    self.stop_rc = -1
                    self.i = i
                    return WALK_ERROR
                parts[i] = -2
                i += 1
                continue
            part = parts[i]
            sticky = False
            if part < 0:
                if kl >= 0:
                    part = partition_for_key(kp, kl, self.key_parts)
                else:
                    # Read without the GIL: another thread may switch it, to a partition
                    # the topic gained after this call sized its slots (a hint: checked).
                    part = self.partitioner.sticky_hint()
                    sticky = True
            # Explicit and keyed partitions are below nparts; only the sticky one can be past
            if part < 0 or part >= self.nparts or self.slots[part].batch == NULL:
                self.cols.values.ci, self.cols.values.pos = vci, vpos
                self.cols.keys.ci, self.cols.keys.pos = kci, kpos
                self.i = i
                self.stop_part, self.stop_size = part, size
                return WALK_NO_STICKY if part < 0 else \
                    WALK_WIDEN if part >= self.nparts else WALK_NO_BATCH
            slot = &self.slots[part]
            ts = self.now
            if self.cols.stamps != NULL and self.cols.stamps[i] >= 0:
                ts = self.cols.stamps[i]
            rc = (<RecordBatchBuilder>slot.builder).append_raw(ts, kp, kl, vp, vl, hp, hl, hc)
            if rc != RBB_APPENDED:
                self.cols.values.ci, self.cols.values.pos = vci, vpos
                self.cols.keys.ci, self.cols.keys.pos = kci, kpos
                self.i = i
                self.stop_part, self.stop_size, self.stop_rc = part, size, rc
                return WALK_FULL if rc == RBB_FULL else WALK_ERROR
            slot.count += 1
            slot.added += size
            parts[i] = part
            i += 1
            self.appended += 1
            switch = sticky and self.partitioner._add_produced(part, size)
            full = (<RecordBatchBuilder>slot.builder).pos >= slot.full_at
            if (full and slot.let_go) or (switch and (full or self.rolled)):
                self.i = i
                self.stop_part = part
                self.stop_full, self.stop_switch = full, switch
                return WALK_AFTER
        self.i = i
        return WALK_DONE

    cdef int _refuse(self, Py_ssize_t i, Py_ssize_t size) noexcept nogil:
        cdef Py_ssize_t* p
        if self.ntoo_large == self.cap_too_large:
            p = <Py_ssize_t*>realloc(self.too_large,
                                     max(16, self.cap_too_large * 2) * 2 * sizeof(Py_ssize_t))
            if p == NULL:
                return -1
            self.too_large = p
            self.cap_too_large = max(16, self.cap_too_large * 2)
        self.too_large[2 * self.ntoo_large] = i
        self.too_large[2 * self.ntoo_large + 1] = size
        self.ntoo_large += 1
        return 0

    cdef int run(self) except -1:
        cdef int st, part
        try:
            while True:
                self.now = kc_wall_ms()
                with nogil:
                    st = self._walk()
                if st == WALK_DONE:
                    break
                part = self.stop_part
                if st == WALK_NO_STICKY:
                    self.partitioner._sticky_partition()
                elif st == WALK_WIDEN:
                    self._widen(part)
                elif st == WALK_NO_BATCH:
                    self._take(part, self.stop_size)
                elif st == WALK_FULL:
                    if not (<ProducerBatch>self.slots[part].batch).grow(self.stop_size, True):
                        self._roll(part)
                        self._take(part, self.stop_size)
                elif st == WALK_AFTER:
                    if self.stop_full:
                        if self.slots[part].let_go:  # sendable: the Sender may take it now
                            self._release(part)      # (else it is held again, and grows)
                            _wake(self)
                        if part == self.partitioner.sticky_hint():
                            self.rolled = True
                    # the batch it filled is full: enable the switch
                    if self.stop_switch and self.rolled and self.partitioner._switch_from(part):
                        self.rolled = False
                elif self.stop_rc == -1:
                    raise MemoryError()
                else:
                    raise ValueError("record %d cannot be encoded (error %d)"
                                     % (self.i, self.stop_rc))
        except KafkaTimeoutError as e:
            raise KafkaTimeoutError("send_batch: %s; %d of %d records were appended before "
                                    "and will still be delivered"
                                    % (e, self.appended, self.n)) from e
        finally:
            self._release_all()
            _wake(self)
        self.future.add_pending(self.appended - self.n)  # see send()
        for j in range(self.ntoo_large):
            self.future.fail_now(self.too_large[2 * j], _too_large(
                RBB_HEADER_SIZE + self.too_large[2 * j + 1], self.path.max_request_size,
                self.path.buffer_memory))
        return 0

    # -- batches (GIL) ----------------------------------------------------------------------
    cdef ProducerBatch _holdable(self, PartitionQueue dq):
        """The partition's open last batch, now held by this call (its hold), or None."""
        cdef ProducerBatch batch = dq.last()
        if batch is None or not dq.claim(batch):
            return None
        return batch

    cdef int _take(self, int part, Py_ssize_t size) except -1:
        """Hold the partition's open last batch, or a new one."""
        cdef RecordAccumulator acc = self.acc
        cdef BufferPool pool = acc.pool
        cdef ProducerBatch batch
        cdef Py_ssize_t need
        cdef uint8_t* mem = NULL
        cdef double max_block_ms
        cdef int rc, other
        cdef Slot* slot
        cdef bint new = False
        cdef PartitionQueue dq = self.info.deques[part]
        batch = self._holdable(dq)
        if batch is None:
            need = max(acc.batch_size, RBB_HEADER_SIZE + size)
            rc = pool._try_now(need, &mem)
            if rc == BP_WOULD_BLOCK:  # let go of the other batches, then wait for memory
                self._release_all()
                max_block_ms = self.path.max_block_ms
                with nogil:
                    rc = pool.acquire_raw(need, max_block_ms, &mem)
            if rc != BP_OK:
                _raise_pool(rc, need, self.path.max_block_ms)
            if kc_load_flag(&acc._closed):
                pool.release_raw(mem, need)
                raise IllegalStateError("Producer closed while send in progress")
            batch = self._holdable(dq)
            if batch is not None:  # another thread made one while this one waited
                pool.release_raw(mem, need)
            else:
                batch = acc._new_batch(dq, self.info.tps[part], mem, need)  # held
                new = True
        # Held from here (claim, or new): drain() and other writers leave it until _release.
        Py_INCREF(batch)
        slot = &self.slots[part]
        slot.batch, slot.builder = <PyObject*>batch, <PyObject*>batch.builder
        slot.ordinal, slot.count, slot.added = batch.record_count, 0, 0
        slot.full_at, slot.let_go = batch.batch_size, not batch.is_full_c()
        if new:
            _wake(self)
        return 0

    cdef int _widen(self, int part) except -1:
        """Slots for the topic's partitions now (another thread's metadata update grew it)."""
        cdef int n = self.info.partitions_c()
        cdef Slot* grown
        if n > self.nparts:
            grown = <Slot*>realloc(self.slots, n * sizeof(Slot))
            if grown == NULL:
                raise MemoryError()
            memset(grown + self.nparts, 0, (n - self.nparts) * sizeof(Slot))
            self.slots, self.nparts = grown, n
        if part >= self.nparts:  # not a partition of the topic as this thread knows it
            self.partitioner._switch_from(part)
        return 0

    cdef int _release_all(self) except -1:
        """Let go of every held batch, each even if another one raises (the first error)."""
        cdef int part
        error = None
        for part in range(self.nparts):
            if self.slots[part].batch != NULL:
                try:
                    self._release(part)
                except BaseException as e:
                    error = e if error is None else error
        if error is not None:
            raise error
        return 0

    cdef int _roll(self, int part) except -1:
        kc_store_flag(&(<ProducerBatch>self.slots[part].batch).closed, 1)
        if part == self.partitioner.sticky_hint():
            self.rolled = True
        return self._release(part)

    cdef int _release(self, int part) except -1:
        """Let go of the held batch, noting the call's records in it."""
        cdef Slot* slot = &self.slots[part]
        cdef ProducerBatch batch = <ProducerBatch>slot.batch
        cdef int64_t rank = slot.rank, count = slot.count
        slot.batch = slot.builder = NULL
        Py_DECREF(batch)  # `batch` holds its own reference
        slot.rank += count
        slot.count = 0
        try:
            if count:
                batch.record_count += <int32_t>count
                kc_store_ssize(&batch.size, batch.size + slot.added)
                if not batch.add_segment_c(self.future, slot.ordinal, rank, count):
                    # done (its error is set once done_c() says so), or being done
                    error = batch.result.error if batch.result.done_c() else None
                    self.future.range_done(part, rank, count, error or KafkaError(
                        "the batch was aborted while records were appended"))
        finally:
            batch.end_append()
        return 0


cdef int _wake(_Call call) except -1:
    """A batch was let go: wake the Sender (C to C through its Waker when it has one)."""
    if call.waker is not None:
        call.waker.wake()
    else:
        call.path.wakeup()
    return 0


cdef class BatchSendPath:
    """KafkaProducer.send_batch (without a custom partitioner: the producer loops over send()
    for that). ``send_path`` is the producer's SendPath (closed and fork checks)."""
    cdef public object send_path, accumulator, wait_on_metadata, wakeup
    cdef public object key_serializer, value_serializer
    cdef public double max_block_ms
    cdef public int64_t max_request_size, buffer_memory

    def __init__(self, send_path, accumulator, wait_on_metadata, wakeup, *, key_serializer,
                 value_serializer, max_block_ms, max_request_size, buffer_memory):
        self.send_path = send_path
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata
        self.wakeup = wakeup
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory

    def send(self, topic, values, keys=None, headers=None, partitions=None, timestamps=None):
        """Append every record; the call's BatchFuture."""
        cdef _Call call
        cdef Py_ssize_t n
        cdef int64_t top = -1
        self.send_path.check_usable()
        n, (values, keys, headers, partitions, timestamps) = check_columns(
            topic, values, keys, headers, partitions, timestamps)
        call = _Call()
        call.path, call.acc, call.n = self, self.accumulator, n
        if isinstance(self.wakeup, Waker):
            call.waker = self.wakeup
        call.placed = _Placement(n)
        top = read_columns(&call.cols, call.keep, call.placed.parts, n, topic, values, keys,
                           headers, partitions, timestamps, self.key_serializer,
                           self.value_serializer)
        future = BatchFuture(topic, n, call.placed.locate)
        call.future = future
        if n:
            call.info = self._topic(topic, top)
            call.nparts = call.key_parts = call.info.partitions_c()
            call.partitioner = call.info.partitioner
            call.slots = <Slot*>calloc(call.nparts, sizeof(Slot))
            if call.slots == NULL:
                raise MemoryError()
            call.limit = min(self.max_request_size, self.buffer_memory)
            future.add_pending(n)  # all of them now; what was not appended off at the end
            call.run()
        future.seal()
        return future

    def _topic(self, topic, int64_t top):
        cdef TopicInfo info
        acc = self.accumulator
        part = top if top >= 0 else None
        info = acc.topic_info(topic)
        if info is None or top >= info.partitions_c():
            try:
                self.wait_on_metadata(topic, part, self.max_block_ms)
            except KafkaTimeoutError as e:
                raise KafkaTimeoutError("send_batch: %s; no records were appended" % (e,)) \
                    from e
            info = acc.topic_info(topic)
            if info is None or top >= info.partitions_c():
                raise _not_in_metadata(topic, part)
        return info
