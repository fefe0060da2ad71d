"""RecordAccumulator: a PartitionQueue of ProducerBatches per partition, appended to by send() and
send_batch() on the caller threads, and drained by the Sender thread (ready, drain, expiry).

As in the Java client (3.3+), the accumulator keeps a TopicInfo per topic: its partitions'
deques and its BuiltInPartitioner, which places null-key records on a sticky partition
(KIP-794) and switches once the partition's batches are full (``update_partition_info``).

The Sender's ready() and drain() are SendChoice's, this class's base
(kcore/pure/send_choice.py), as in kcore/send_choice.pyx; this module keeps the queues, the
appends, the batches' retries, expiry and completion.
"""
import random
import threading
import time
import weakref

from kcore.pure.at_fork import guard_locks
from kcore.pure.buffer_pool import BufferPool
from kcore.pure.builtin_partitioner import BuiltInPartitioner
from kcore.pure.future import TopicPartition
from kcore._network_poll import now_us
from kcore.pure.partition_queue import PartitionQueue
from kcore.pure.producer_batch import BATCH_HEADER, ProducerBatch
from kcore.pure.send_choice import SendChoice
from kcore._record_accumulator import ReadyCheckResult
from kcore.errors import IllegalStateError

__all__ = ["RecordAccumulator", "ReadyCheckResult", "TopicInfo"]


class TopicInfo:
    """One topic as the accumulator sees it: partitions (as of a metadata version), their
    deques, and its BuiltInPartitioner (the sticky partition for null keys)."""
    __slots__ = ("topic", "version", "num_partitions", "tps", "deques", "partitioner")

    def __init__(self, topic, partitioner):
        self.topic = topic
        self.version = -1
        self.num_partitions = 0
        self.tps = []
        self.deques = []
        self.partitioner = partitioner


_accumulators = weakref.WeakSet()


def _after_fork_in_child():  # the threads that held the locks at the fork are the parent's
    for acc in list(_accumulators):
        acc._lock = threading.RLock()


# imported after buffer_pool and producer_batch: a fork takes these locks before theirs
guard_locks(lambda: [acc._lock for acc in list(_accumulators)], _after_fork_in_child)


def _filled(batch, size):
    """The bytes a batch with no room for size more holds, if it cannot grow; else 0."""
    return 0 if batch.growth_size(size) else batch.size  # an upper bound, header included


class RecordAccumulator(SendChoice):
    def __init__(self, metadata, txn_partitions=None, *, batch_size, linger_ms,
                 buffer_memory, compression_type, delivery_timeout_ms, retry_backoff_ms,
                 batch_max_size=None, seed=None):
        self.batch_size = batch_size
        # an open batch takes records past batch_size (it is sendable from there) up to this
        self.batch_max_size = batch_size if batch_max_size is None else \
            max(batch_max_size, batch_size)
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression_type = compression_type
        self.pool = BufferPool(buffer_memory, max(self.batch_size, 1))
        self.metadata = metadata
        self._metadata_version = metadata.version  # metadata_updated() keeps it
        self.txn_partitions = txn_partitions
        self._topics = {}
        self._deques = {}  # TopicPartition -> its PartitionQueue of ProducerBatch
        self._lock = threading.RLock()
        _accumulators.add(self)
        self._incomplete = set()
        self._flushes = 0
        self._closed = False
        self._drain_index = 0
        self._seeds = None if seed is None else random.Random(seed)  # the partitioners' seeds

    def lower_batch_max_size(self, refused):
        """A grown batch of refused bytes was too large for the broker: batches grow to half
        that from now on (never below batch_size). The new bound, if it was lowered, else
        None."""
        bound = max(refused // 2, self.batch_size)
        if bound >= self.batch_max_size:
            return None
        self.batch_max_size = bound
        return bound

    # -- topics and their partitioners ------------------------------------------------------
    def metadata_updated(self, version):
        """The metadata's update listener: topics are read again at their next record."""
        self._metadata_version = version

    def topic_info(self, topic):
        """The topic's TopicInfo, current with metadata (as of metadata_updated(); read again
        here once it is not); None while metadata lacks it."""
        info = self._topics.get(topic)
        if info is not None and info.version == self._metadata_version:
            return info if info.num_partitions else None
        version = self.metadata.version
        if info is not None and info.version >= version:
            return info if info.num_partitions else None
        cluster = self.metadata.cluster
        with self._lock:
            if info is None:
                info = self._topics.setdefault(topic, TopicInfo(topic, BuiltInPartitioner(
                    topic, self.batch_size,
                    None if self._seeds is None else self._seeds.getrandbits(64))))
            parts = cluster.partitions_for_topic(topic)
            count = max(parts) + 1 if parts else 0
            # A finalizer run while queues are made may come in here again (the lock is this
            # thread's): new lists, published together, unless newer metadata was meanwhile.
            tps, deques = list(info.tps), list(info.deques)
            while len(deques) < count:
                tp = TopicPartition(topic, len(deques))
                tps.append(tp)
                deques.append(self._queue(tp))
            if version < info.version:
                return info if info.num_partitions else None
            if len(deques) > len(info.deques):
                info.tps, info.deques = tps, deques
            info.num_partitions = count
            info.partitioner.update_partitions(
                sorted(cluster.available_partitions_for_topic(topic) or parts or ()), count)
            info.version = version
        return info if count else None

    def update_partition_info(self, info, partition, appended_bytes):
        """After a null-key append: tell the topic's partitioner, which switches once
        batch_size bytes went to the partition and its batches are all full (Java's
        enableSwitch)."""
        partitioner = info.partitioner
        if partitioner.add_produced(partition, appended_bytes):
            dq = info.deques[partition]
            with self._lock:  # the Sender may take the last batch between the looks
                all_full = not dq or len(dq) > 1 or dq[-1].is_full()
            if all_full:
                partitioner.switch_from(partition)

    def _queue(self, tp):
        dq = self._deques.get(tp)
        return dq if dq is not None else self._deques.setdefault(tp, PartitionQueue(tp))

    def mute(self, tp):
        """No batch of tp is drained until unmute(tp) (order with one request in flight)."""
        self._queue(tp).muted = True

    def unmute(self, tp):
        self._queue(tp).muted = False

    @property
    def muted(self):
        return frozenset(dq.tp for dq in list(self._deques.values()) if dq.muted)

    # -- caller threads ---------------------------------------------------------------------
    def append(self, tp, timestamp_ms, key, value, headers, header_size, size, max_block_ms,
               now, abort_on_new_batch=False):
        """(future, batch_became_full, new_batch_created, aborted_for_new_batch):
        batch_became_full is True for the append that took the batch to batch_size, once. A new
        batch is stamped after any wait for memory (``now`` is the send's start, kept for the API)."""
        dq = self._queue(tp)
        with self._lock:
            future, became_full = self._try_append(dq, timestamp_ms, key, value, headers,
                                                   header_size, size)
            if future is not None:
                return future, became_full, False, False
            filled = _filled(dq[-1], size) if dq else 0
        if abort_on_new_batch:
            return None, False, False, True
        # No room: take memory (may block, without the accumulator lock), then retry. A wait
        # is for the room the open batch needs to grow, if it can (as the compiled twin). A
        # batch that cannot grow on: the next starts at the bytes it filled if they are free.
        need = max(self.batch_size, BATCH_HEADER + size)
        deadline = time.monotonic() * 1000 + max_block_ms  # all waits together: max_block_ms
        memory = None
        if min(filled, self.batch_max_size) > need:
            memory = self.pool.try_allocate(min(filled, self.batch_max_size))
        if memory is None:
            memory = self.pool.try_allocate(need)
        if memory is None:
            with self._lock:
                grow_to = min(dq[-1].growth_size(size), self.pool.total_memory) if dq else 0
            memory = self.pool.allocate(max(need, grow_to), max_block_ms)
        try:
            while True:
                with self._lock:
                    if self._closed:
                        raise IllegalStateError("Producer closed while send in progress")
                    if dq and len(memory) > need and dq[-1].growth_size(size):
                        dq[-1].grow_into(memory)  # it owns memory now, or gave it back
                        memory = None
                    future, became_full = self._try_append(dq, timestamp_ms, key, value,
                                                           headers, header_size, size)
                    if future is not None:
                        return future, became_full, False, False
                    if memory is not None:
                        batch, memory = self._new_batch(dq, tp, memory), None
                        future = batch.try_append(timestamp_ms, key, value, headers,
                                                  header_size, size)
                        return future, batch.is_full(), True, False
                    memory = self.pool.try_allocate(need)  # it grew; others filled it
                if memory is None:
                    memory = self.pool.allocate(
                        need, max(deadline - time.monotonic() * 1000, 0))
        finally:
            if memory is not None:
                self.pool.deallocate(memory)

    def _new_batch(self, dq, tp, memory):
        """A new batch accounting for memory (from the pool), last in dq (lock held)."""
        now = now_us()
        batch = ProducerBatch(tp, self.batch_size, self.compression_type, now // 1000,
                              self.batch_max_size, now % 1000)
        batch.attach(self.pool, memory)
        dq.append(batch)
        self._incomplete.add(batch)
        return batch

    @staticmethod
    def _try_append(dq, timestamp_ms, key, value, headers, header_size, size):
        """(future or None, whether this append took the batch to batch_size)."""
        if not dq:
            return None, False
        last = dq[-1]
        if last.appending:  # another thread's writer holds it: a new batch follows it
            return None, False
        was_full = last.is_full()
        future = last.try_append(timestamp_ms, key, value, headers, header_size, size)
        if future is None:
            if last.growth_size(size):
                last.starved = True  # sendable as if full; grows if room comes first
            else:
                last.close()
            return None, False
        return future, not was_full and last.is_full()

    def reenqueue(self, batch, now):
        """Put a batch to retry back at the head of its deque, in sequence order."""
        batch.attempts += 1
        batch.last_attempt_ms = now
        with self._lock:
            self._insert_in_order(self._deques[batch.topic_partition], batch)

    @staticmethod
    def _insert_in_order(dq, batch):
        if not batch.has_sequence:
            dq.appendleft(batch)
            return
        i = 0
        while i < len(dq) and dq[i].has_sequence and dq[i].base_sequence < batch.base_sequence:
            i += 1
        dq.insert(i, batch)

    def split_and_reenqueue(self, batch):
        """The halves of a batch the broker refused as too large, back at the head of its deque
        (Java's splitAndReenqueue); the batch completes once they have (the Sender's part)."""
        halves = batch.split(self.batch_size, self.compression_type)
        with self._lock:
            dq = self._deques[batch.topic_partition]
            for half in reversed(halves):
                self._insert_in_order(dq, half)
            self._incomplete.update(halves)
        return halves

    def expired_batches(self, now):
        """Queued batches older than delivery_timeout_ms, removed from their deques."""
        expired = []
        with self._lock:
            for dq in self._deques.values():
                while dq and now - dq[0].created_ms >= self.delivery_timeout_ms \
                        and not dq[0].appending:
                    expired.append(dq.popleft())
        return expired

    def next_expiry_delay(self, now):
        with self._lock:
            oldest = min((dq[0].created_ms for dq in self._deques.values() if dq), default=None)
        return float("inf") if oldest is None else max(oldest + self.delivery_timeout_ms - now, 0)

    def complete(self, batch, base_offset=-1, log_append_time=-1, error=None, record_errors=None):
        """Finish a batch once: complete its futures and give its memory back."""
        with self._lock:
            if batch not in self._incomplete:
                return
            self._incomplete.discard(batch)
        batch.done(base_offset, log_append_time, error, record_errors)
        batch.release_memory()

    # -- flush and close --------------------------------------------------------------------
    def begin_flush(self):
        with self._lock:
            self._flushes += 1

    def end_flush(self):
        with self._lock:
            self._flushes -= 1

    def incomplete_results(self):
        with self._lock:
            return [b.result for b in self._incomplete]

    def has_incomplete(self):
        return bool(self._incomplete)

    def has_undrained(self):
        with self._lock:
            return any(self._deques.values())

    def undrained_partitions(self):
        """The partitions with batches waiting in their queues."""
        with self._lock:
            return [tp for tp, dq in self._deques.items() if dq]

    def take_undrained(self):
        """Every batch waiting in a queue, taken off it (an aborted transaction's)."""
        with self._lock:
            taken = [batch for dq in self._deques.values() for batch in dq]
            for dq in self._deques.values():
                dq.clear()
        return taken

    def close(self):
        with self._lock:
            self._closed = True

    def abort_incomplete(self, error, close=True):
        """Fail every batch not completed yet; close=True (the producer is closing) also fails
        current and later memory waits."""
        with self._lock:
            batches = list(self._incomplete)
            for dq in self._deques.values():
                dq.clear()
        for batch in batches:
            self.complete(batch, error=error)
        if close:
            self.pool.close()
