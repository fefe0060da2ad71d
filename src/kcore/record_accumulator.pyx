# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/record_accumulator.py (see it for the design).

The GIL is the lock for the accumulator's Python state; a large record is copied without it
only while its batch is marked ``appending`` (drain() leaves such a batch). Each partition's
batches are a PartitionQueue (kcore.partition_queue), a C ring under its own mutex, so that
ready() can scan them all without the GIL while callers append, and drain() choose its batches
the same way (the TxnPartitionMap's per-partition state is C, owned by the Sender thread).
ready() and drain() are kcore.send_choice's (SendChoice, this class's base); this module keeps
the topics, the appends, and the batches' retries, expiry and completion.
Threads: see record_accumulator.pxd and send_choice.pxd.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.object cimport PyTypeObject, newfunc
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_Compare, PyUnicode_GET_LENGTH
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc

from kcore.atomic_impl cimport (kc_add_i64, kc_load_flag, kc_load_i64, kc_load_int_acquire,
                                kc_load_ptr_acquire, kc_load_ssize, kc_store_flag, kc_store_i64,
                                kc_store_int_release, kc_store_ptr_release, kc_store_ssize)
from kcore.buffer_pool cimport BP_CLOSED, BP_OK, BP_TIMEOUT, BP_TOO_LARGE
from kcore.builtin_partitioner cimport BuiltInPartitioner
from kcore.clock cimport now_us_c
from kcore.ft_impl cimport kc_ft_enter, kc_ft_exit
from kcore.future cimport FutureRecordMetadata
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport HELD, ProducerBatch
from kcore.record_batch_builder cimport RBB_HEADER_SIZE, encode_headers
from kcore.send_choice cimport ReadyScan, SendChoice, delay_ms, ms_to_us
from kcore.sync_impl cimport kc_mutex_lock, kc_mutex_unlock
from kcore.txn_partition_map cimport TxnPartitionMap

import random
import threading
import time

from kcore.buffer_pool import BufferPool as _BufferPool
from kcore.future import TopicPartition
from kcore.errors import IllegalStateError, KafkaTimeoutError

from kcore.send_choice import ReadyCheckResult, _too_large  # (kcore/_record_accumulator.py's)

__all__ = ["RecordAccumulator", "ReadyCheckResult", "TopicInfo"]

cdef extern from "Python.h":
    void _decref "Py_DECREF"(PyObject* o)

_monotonic = time.monotonic


cdef class TopicInfo:
    """One topic: partitions (as of a metadata version), their deques, its partitioner."""

    def __init__(self, topic, BuiltInPartitioner partitioner):
        self.topic = topic
        self.version = -1
        self.tps, self.deques = [], []
        self.partitioner = partitioner


cdef struct _Rec:  # a record for _append's helpers
    int64_t ts
    const uint8_t* kp
    const uint8_t* vp
    const uint8_t* hp
    Py_ssize_t kl, vl, hl, size
    int32_t hcount
    int64_t header_size


cdef FutureRecordMetadata _append_held(ProducerBatch batch, _Rec* r, int* flags):
    """The record into a batch this thread holds (None: no room); APPEND_FULL if it filled it."""
    cdef bint was_full = batch.is_full_c()
    future = batch.append_c(r.ts, r.kp, r.kl, r.vp, r.vl, r.hp, r.hl, r.hcount, r.kl, r.vl,
                            r.header_size, r.size)
    if future is not None and not was_full and batch.is_full_c():
        flags[0] |= APPEND_FULL
    return future


cdef FutureRecordMetadata _append_to(PartitionQueue dq, ProducerBatch batch, _Rec* r,
                                     int* flags, uint8_t** mem, Py_ssize_t got,
                                     Py_ssize_t need, Py_ssize_t* want, Py_ssize_t* filled):
    """Hold batch and append (None: held by another writer, closed, or no room); with mem, it
    first grows into mem (got bytes, more than need) if it can: mem then is its, or given back
    (NULL either way). When it had no room: want, the size the batch would grow to for the
    record (0: it cannot); filled, the bytes it holds."""
    if not dq.claim(batch):
        return None
    try:
        if mem != NULL and got > need and batch._growth(r.size):
            batch._move_into(mem[0], got)
            mem[0] = NULL
        future = _append_held(batch, r, flags)
        if future is None and want != NULL:  # as its holder: no other writer meanwhile
            want[0] = batch._growth(r.size)
            filled[0] = kc_load_ssize(&batch.size)  # an upper bound, the header included
        return future
    finally:
        batch.end_append()


cdef inline bint _same(str topic, str known) noexcept:
    """topic is known's name: the same object, or equal (a name made at run time, not the
    literal first sent to). Reads only: neither string's reference count changes."""
    return topic is known or (PyUnicode_GET_LENGTH(topic) == PyUnicode_GET_LENGTH(known) and
                              PyUnicode_Compare(topic, known) == 0)


cdef int _reentered(tp) except -1:
    raise IllegalStateError("send() to %s came back in on the thread appending to it (from a "
                            "finalizer the collector ran?)" % (tp,))


cdef class RecordAccumulator(SendChoice):
    def __init__(self, metadata, txn_partitions=None, *, batch_size, linger_ms,
                 buffer_memory, compression_type, delivery_timeout_ms, retry_backoff_ms,
                 batch_max_size=None, seed=None):
        self.batch_size = batch_size
        kc_store_ssize(&self._batch_max_size, batch_size if batch_max_size is None else
                       max(<Py_ssize_t>batch_max_size, self.batch_size))
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression_type = compression_type
        self.pool = _BufferPool(buffer_memory, max(self.batch_size, 1))
        self.metadata = metadata
        self._metadata_version = metadata.version
        self.txn_partitions = txn_partitions
        self._topics, self._deques, self._incomplete = {}, {}, set()
        self._topics_lock = threading.RLock()
        self._seeds = None if seed is None else random.Random(seed)

    @property
    def batch_max_size(self):
        """The size an open batch may grow to (bytes, at least batch_size)."""
        return kc_load_ssize(&self._batch_max_size)

    def lower_batch_max_size(self, Py_ssize_t refused):
        """A grown batch of refused bytes was too large for the broker: batches grow to half
        that from now on (never below batch_size). The new bound, if it was lowered, else
        None."""
        cdef Py_ssize_t bound = max(refused // 2, self.batch_size)
        if bound >= kc_load_ssize(&self._batch_max_size):
            return None
        kc_store_ssize(&self._batch_max_size, bound)
        return bound

    # -- partition queues --------------------------------------------------------------------
    cdef PartitionQueue _queue(self, object tp):
        cdef PartitionQueue dq = self._deques.get(tp)
        cdef PyObject** grown = NULL
        cdef Py_ssize_t cap
        if dq is not None:
            return dq
        # One queue per tp whatever other threads do meanwhile (making one may run the
        # collector): the one setdefault keeps is the one published to _queues.
        mine = PartitionQueue(tp)
        dq = self._deques.setdefault(tp, mine)  # holds the reference _queues borrows
        if dq is not mine:
            return dq
        kc_mutex_lock(&self._queues_lock)
        if self._nqueues == self._queues_cap:
            cap = self._queues_cap * 2 if self._queues_cap else 16
            grown = <PyObject**>malloc(cap * sizeof(PyObject*))  # C only under the lock
            if grown == NULL:
                kc_mutex_unlock(&self._queues_lock)
                raise MemoryError()
            for i in range(self._nqueues):
                grown[i] = self._queues[i]
            free(self._queues)
            self._queues, self._queues_cap = grown, cap
        self._queues[self._nqueues] = <PyObject*>dq
        kc_store_ssize(&self._nqueues, self._nqueues + 1)
        kc_mutex_unlock(&self._queues_lock)
        return dq

    def mute(self, tp):
        """No batch of tp is drained until unmute(tp) (order with one request in flight)."""
        self._queue(tp).muted = True

    def unmute(self, tp):
        self._queue(tp).muted = False

    @property
    def muted(self):
        return frozenset(dq.tp for dq in list(self._deques.values())
                         if (<PartitionQueue>dq).muted)

    # -- topics and their partitioners ------------------------------------------------------
    def topic_info(self, str topic):
        return self._topic_info(topic)

    def metadata_updated(self, int64_t version):
        """The metadata's update listener: topics are read again at their next record."""
        kc_store_i64(&self._metadata_version, version)

    cdef TopicInfo _topic_info(self, str topic):
        cdef PyObject* known = self._known_topic(topic)
        if known != NULL:
            return <TopicInfo>known
        cdef TopicInfo info = self._topics.get(topic)
        if info is not None and <void*>info != kc_load_ptr_acquire(&self._last_info):
            kc_store_ptr_release(&self._last_info, <void*>info)  # (only when it changes: a
            # store, even of the same value, takes the cache line from the other threads)
        if info is not None and kc_load_i64(&info.version) == \
                kc_load_i64(&self._metadata_version):
            return info if kc_load_int_acquire(&info.num_partitions) else None
        with self._topics_lock:
            return self._update_topic(topic, self.metadata.version)

    cdef PyObject* _known_topic(self, str topic) noexcept:
        cdef void* last = kc_load_ptr_acquire(&self._last_info)
        if last != NULL and _same(topic, (<TopicInfo>last).topic) and \
                kc_load_i64(&(<TopicInfo>last).version) == \
                kc_load_i64(&self._metadata_version) and \
                kc_load_int_acquire(&(<TopicInfo>last).num_partitions):
            return <PyObject*>last
        return NULL

    cdef TopicInfo _update_topic(self, str topic, int64_t version):
        """_topic_info's update, under _topics_lock (an RLock: a finalizer the collector runs
        while a queue is made may come back in, and finds the lists as far as they got)."""
        cdef TopicInfo info = self._topics.get(topic)
        cdef Py_ssize_t i
        cdef int count
        if info is None:
            info = TopicInfo(topic, BuiltInPartitioner(
                topic, self.batch_size,
                None if self._seeds is None else self._seeds.getrandbits(64)))
            self._topics[topic] = info
        elif info.version >= version:  # another thread was first, or newer metadata
            return info if info.num_partitions else None
        cluster = self.metadata.cluster
        parts = cluster.partitions_for_topic(topic)
        count = max(parts) + 1 if parts else 0
        # The lists only grow, in place (readers index them without the lock, below
        # num_partitions): tps first, then deques.
        while len(info.deques) < count:
            i = len(info.deques)
            tp = TopicPartition(topic, i)
            dq = self._queue(tp)
            if len(info.deques) == i:
                info.tps.append(tp)
                info.deques.append(dq)
        available = sorted(cluster.available_partitions_for_topic(topic) or parts or ())
        # Python code ran above (the metadata's accessors, queue making): the collector may
        # have run this update again with newer metadata (3.12+ collects at the next bytecode
        # boundary). That one stands: this one, from an older version, writes nothing.
        if kc_load_i64(&info.version) >= version:
            return info if info.num_partitions else None
        info.partitioner._update_partitions(available, count)
        kc_store_int_release(&info.num_partitions, count)
        kc_store_i64(&info.version, version)
        return info if count else None

    def update_partition_info(self, TopicInfo info, int partition, Py_ssize_t appended_bytes):
        self._update_partition_info(info, partition, appended_bytes)

    cdef int _update_partition_info(self, TopicInfo info, int partition,
                                    Py_ssize_t appended_bytes) except -1:
        # info.partitioner's methods called on the attribute: a local would take a reference
        # to the partitioner, which every caller thread shares (send_path.pyx _send)
        if info.partitioner._add_produced(partition, appended_bytes):
            if (<PartitionQueue>info.deques[partition]).all_full():
                info.partitioner._switch_from(partition)
        return 0

    # -- caller threads ---------------------------------------------------------------------
    def append(self, tp, timestamp_ms, key, value, headers, header_size, size, max_block_ms,
               now, abort_on_new_batch=False):
        """(future, batch_became_full, new_batch_created, aborted_for_new_batch):
        batch_became_full is True for the append that took the batch to batch_size, once."""
        cdef int32_t hcount = 0
        cdef bytes hbytes = encode_headers(headers, &hcount) if headers else None
        if key is not None and not PyBytes_CheckExact(key):
            key = bytes(key)
        if value is not None and not PyBytes_CheckExact(value):
            value = bytes(value)
        cdef int flags = 0
        future = self._append(self._queue(tp), tp, timestamp_ms, key, value, hbytes, hcount,
                              header_size, size, max_block_ms, abort_on_new_batch, &flags)
        return (future, bool(flags & APPEND_FULL), bool(flags & APPEND_NEW_BATCH),
                bool(flags & APPEND_ABORTED))

    cdef FutureRecordMetadata _append(self, PartitionQueue dq, object tp, int64_t ts,
                                      object key, object value, bytes hbytes, int32_t hcount,
                                      int64_t header_size, Py_ssize_t size,
                                      double max_block_ms, bint abort_on_new_batch,
                                      int* flags):
        cdef const uint8_t* kp = NULL
        cdef const uint8_t* vp = NULL
        cdef const uint8_t* hp = NULL
        cdef Py_ssize_t kl = -1, vl = -1, hl = 0, need, got
        cdef ProducerBatch batch
        cdef FutureRecordMetadata future
        cdef uint8_t* mem = NULL
        cdef int rc
        if key is not None:
            kp, kl = <const uint8_t*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)
        if value is not None:
            vp, vl = <const uint8_t*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
        if hbytes is not None:
            hp, hl = <const uint8_t*>PyBytes_AS_STRING(hbytes), PyBytes_GET_SIZE(hbytes)
        cdef _Rec r
        r.ts, r.kp, r.kl, r.vp, r.vl, r.hp, r.hl = ts, kp, kl, vp, vl, hp, hl
        r.hcount, r.header_size, r.size = hcount, header_size, size
        cdef Py_ssize_t want = 0, filled = 0
        cdef double deadline
        if kc_ft_enter(&dq.append_lock) < 0:
            _reentered(tp)
        try:
            batch = dq.last()
            if batch is not None:
                future = _append_to(dq, batch, &r, flags, NULL, 0, 0, &want, &filled)
                if future is not None:
                    return future
            if abort_on_new_batch:
                flags[0] = APPEND_ABORTED
                return None
        finally:
            kc_ft_exit(&dq.append_lock)
        # No room: take memory, waiting without the GIL only if the pool is short (letting the
        # GIL go on every new batch hands it to the other caller threads), then retry. A wait
        # is for the room the open batch needs to grow, if it can: under memory pressure
        # batches keep growing (and requests stay full) rather than close small.
        # A batch that cannot grow on: the next one starts at the bytes it filled if the pool
        # has them now, rather than grow (a copy) through the same steps (a batch the Sender
        # took at batch_size leaves the next one at batch_size).
        need = max(self.batch_size, RBB_HEADER_SIZE + size)
        got = min(want, self.pool.total_memory)
        deadline = _monotonic() * 1000 + max_block_ms  # all waits together: max_block_ms
        got = self._memory(need, max(need, got), max_block_ms, &mem,
                           0 if want else min(filled, kc_load_ssize(&self._batch_max_size)))
        if kc_ft_enter(&dq.append_lock) < 0:
            self.pool.release_raw(mem, got)
            _reentered(tp)
        try:
            batch = dq.last()
            if batch is not None:  # another thread may have made one while this one waited
                try:
                    future = _append_to(dq, batch, &r, flags, &mem, got, need, NULL, NULL)
                except BaseException:
                    if mem != NULL:
                        self.pool.release_raw(mem, got)
                    raise
                if future is not None:
                    if mem != NULL:
                        self.pool.release_raw(mem, got)
                    return future
                if mem == NULL:  # it grew, and other threads filled it meanwhile
                    got = self._memory(need, need, max(deadline - _monotonic() * 1000, 0),
                                       &mem)
            batch = self._new_batch(dq, tp, mem, got)  # held by this thread
            try:
                future = _append_held(batch, &r, flags)
            finally:
                batch.end_append()
            flags[0] |= APPEND_NEW_BATCH
            return future
        finally:
            kc_ft_exit(&dq.append_lock)

    cdef Py_ssize_t _memory(self, Py_ssize_t need, Py_ssize_t wait_size, double max_block_ms,
                            uint8_t** mem, Py_ssize_t first=0) except -1:
        """first bytes (if more than need) or need bytes at once if the pool has them, else
        wait_size after a wait without the GIL; returns the size taken."""
        cdef Py_ssize_t got = first
        cdef int rc = self.pool._try_now(first, mem) if first > need else BP_TIMEOUT
        if rc != BP_OK:
            got = need
            rc = self.pool._try_now(need, mem)
        if rc != BP_OK:
            got = wait_size
            with nogil:
                rc = self.pool.acquire_raw(got, max_block_ms, mem)
        if rc != BP_OK:
            _raise_pool(rc, got, max_block_ms)
        if kc_load_flag(&self._closed):
            self.pool.release_raw(mem[0], got)
            raise IllegalStateError("Producer closed while send in progress")
        return got

    cdef ProducerBatch _new_batch(self, PartitionQueue dq, object tp, uint8_t* mem,
                                  Py_ssize_t need):
        cdef ProducerBatch batch
        cdef int64_t now_us = now_us_c()
        try:
            batch = ProducerBatch(tp, self.batch_size, self.compression_type, now_us // 1000,
                                  kc_load_ssize(&self._batch_max_size), now_us % 1000)
        except BaseException:
            self.pool.release_raw(mem, need)
            raise
        batch.attach(self.pool, mem, need)  # the batch owns mem from here (and frees it)
        batch.appending = HELD  # the caller's from the start: drain() leaves it
        self._incomplete.add(batch)
        try:
            dq.insert_c(PY_SSIZE_T_MAX, batch)
        except BaseException:
            self._incomplete.discard(batch)
            raise
        return batch

    def reenqueue(self, ProducerBatch batch, int64_t now):
        batch.attempts += 1
        batch.last_attempt_ms = now
        self._queue(batch.topic_partition).insert_c(-1, batch)  # by sequence

    def split_and_reenqueue(self, ProducerBatch batch):
        """The halves of a batch the broker refused as too large, back at the head of its deque
        (Java's splitAndReenqueue); the batch completes once they have (the Sender's part)."""
        cdef PartitionQueue dq = self._queue(batch.topic_partition)
        halves = batch.split(self.batch_size, self.compression_type)
        for half in reversed(halves):
            dq.insert_c(-1, half)
        self._incomplete.update(halves)
        return halves

    def expired_batches(self, int64_t now):
        cdef list expired = []
        cdef PartitionQueue dq
        cdef ProducerBatch first
        for dq in list(self._deques.values()):
            first = dq.front()
            while first is not None and now - first.created_ms >= self.delivery_timeout_ms \
                    and dq.take_head(first):  # (not while a caller holds it)
                expired.append(first)
                first = dq.front()
        return expired

    def next_expiry_delay(self, int64_t now):
        cdef int64_t oldest = INT64_MAX
        cdef PartitionQueue dq
        cdef ProducerBatch first
        for dq in list(self._deques.values()):
            first = dq.front()
            if first is not None:
                oldest = min(oldest, first.created_ms)
        return float("inf") if oldest == INT64_MAX else \
            max(oldest + self.delivery_timeout_ms - now, 0)

    def complete(self, ProducerBatch batch, base_offset=-1, log_append_time=-1, error=None,
                 record_errors=None):
        try:
            self._incomplete.remove(batch)  # once, whichever threads race here
        except KeyError:
            return
        batch.done(base_offset, log_append_time, error, record_errors)
        batch.release_memory()

    # -- flush and close: the twin's, over this class's state --------------------------------
    def begin_flush(self):
        kc_add_i64(&self._flushes, 1)

    def end_flush(self):
        kc_add_i64(&self._flushes, -1)

    def incomplete_results(self):
        return [(<ProducerBatch>b).result for b in list(self._incomplete)]

    def has_incomplete(self):
        return bool(self._incomplete)

    def has_undrained(self):
        return any([(<PartitionQueue>dq).size_c() for dq in list(self._deques.values())])

    def undrained_partitions(self):
        """The partitions with batches waiting in their queues."""
        return [tp for tp, dq in list(self._deques.items()) if (<PartitionQueue>dq).size_c()]

    def take_undrained(self):
        """Every batch waiting in a queue, taken off it (an aborted transaction's)."""
        cdef list taken = []
        cdef PartitionQueue dq
        cdef PyObject* p
        for dq in list(self._deques.values()):
            p = dq._take_front()
            while p != NULL:
                taken.append(<object>p)
                _decref(p)  # the queue's
                p = dq._take_front()
        return taken

    def close(self):
        kc_store_flag(&self._closed, 1)

    def abort_incomplete(self, error, close=True):
        """Fail every batch not completed yet; close=True (the producer is closing) also fails
        current and later memory waits."""
        batches = list(self._incomplete)
        for dq in list(self._deques.values()):
            dq.clear()
        for batch in batches:
            self.complete(batch, error=error)
        if close:
            self.pool.close()


cdef int _raise_pool(int rc, Py_ssize_t need, double max_block_ms) except -1:
    if rc == BP_TIMEOUT:
        raise KafkaTimeoutError("Failed to allocate memory within the configured max blocking "
                                "time %d ms." % max_block_ms)
    if rc == BP_CLOSED:
        raise IllegalStateError("Producer closed while allocating memory")
    if rc == BP_TOO_LARGE:
        raise _too_large(need, need, 0)
    raise MemoryError()
