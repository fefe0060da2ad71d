# RecordAccumulator and TopicInfo (see record_accumulator.pyx): cimported by send_path and
# batch_send. RecordAccumulator's base, SendChoice (send_choice.pxd), is the Sender's side:
# ready() and drain(), the queue array and what they choose from (pool, linger_ms,
# retry_backoff_ms, txn_partitions, _closed, _flushes, _drain_index, _queues, the queues'
# leaders...): their rules are written there.
#
# Threads (the one place these rules are written; record_accumulator.pyx points here):
# - _topics, _deques, _incomplete: dicts and a set, each operation atomic (also free-threaded);
#   no sequence of them relies on another thread waiting: a queue per tp is kept by
#   _deques.setdefault (the one published to _queues), complete() removes a batch from
#   _incomplete once. _deques keeps the queues that SendChoice._queues borrows.
# - TopicInfo: made and updated under _topics_lock (_update_topic). tps and deques only grow,
#   in place; num_partitions (store-release after them) and version are atomic: readers
#   without the lock load num_partitions (kc_load_int_acquire) and index the lists below it.
#   partitioner: set once. _seeds: under _topics_lock.
# - batch_size, delivery_timeout_ms, metadata, compression_type: set in __init__, then
#   read-only (also without the GIL).
# - _batch_max_size: atomic (kc_load_ssize / kc_store_ssize); set in __init__, lowered only by
#   lower_batch_max_size (the Sender thread, after a grown batch was refused as too large);
#   caller threads load it for each new or growing batch.
# - _metadata_version: atomic; metadata_updated() stores it (the Metadata's update listener,
#   under the Metadata's lock: before its waiters wake), _topic_info loads it per record.
# - _last_info: the TopicInfo _topic_info last found (borrowed: _topics keeps every TopicInfo
#   while the accumulator lives); any caller thread stores it (release) and loads it (acquire).
# - Appends (_append): under the queue's append_lock (partition_queue.pxd), holding the batch
#   they fill (its `appending`, producer_batch.pxd); _new_batch returns its batch held.
# - Batches: producer_batch.pxd; queues: partition_queue.pxd; pool: buffer_pool.pxd.
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.atomic_impl cimport kc_load_int_acquire

from kcore.builtin_partitioner cimport BuiltInPartitioner
from kcore.future cimport FutureRecordMetadata
from kcore.partition_queue cimport PartitionQueue
from kcore.producer_batch cimport ProducerBatch
from kcore.send_choice cimport SendChoice
from kcore.txn_partition_map cimport TxnPartitionMap


cdef class TopicInfo:
    cdef public str topic
    cdef public int64_t version
    cdef public int num_partitions
    cdef public list tps
    cdef public list deques                       # PartitionQueue per partition
    cdef public BuiltInPartitioner partitioner   # the sticky partition for null keys

    # num_partitions for a reader without _topics_lock: the lists are this long at least
    cdef inline int partitions_c(self) noexcept nogil:
        return kc_load_int_acquire(&self.num_partitions)


# _append's flags: the append took its batch to batch_size (once per batch); it made a new
# batch; it stopped before making one (abort_on_new_batch).
cdef enum:
    APPEND_FULL = 1
    APPEND_NEW_BATCH = 2
    APPEND_ABORTED = 4


cdef class RecordAccumulator(SendChoice):
    # (linger_ms, retry_backoff_ms, pool, txn_partitions, the queue array: SendChoice's)
    cdef public Py_ssize_t batch_size
    cdef Py_ssize_t _batch_max_size   # an open batch grows up to this (>= batch_size; atomic)
    cdef public int64_t delivery_timeout_ms
    cdef public object compression_type
    cdef public object metadata
    cdef dict _topics, _deques         # topic -> TopicInfo, tp -> PartitionQueue
    cdef object _topics_lock           # an RLock: _topics' updates, one at a time
    cdef set _incomplete
    cdef object _seeds   # random.Random(seed) for the partitioners' seeds, or None
    cdef int64_t _metadata_version     # metadata.version as of its last update
    cdef void* _last_info              # a TopicInfo (borrowed), or NULL

    cdef PartitionQueue _queue(self, object tp)
    cdef TopicInfo _topic_info(self, str topic)
    # _topic_info's fast path, borrowed: the TopicInfo last found if it is topic's, current
    # and has partitions, else NULL (a reference taken is an atomic write to an object every
    # caller thread shares, on a free-threaded build)
    cdef PyObject* _known_topic(self, str topic) noexcept
    cdef TopicInfo _update_topic(self, str topic, int64_t version)
    # After a null-key append: the partitioner switches once the partition's batches are full.
    cdef int _update_partition_info(self, TopicInfo info, int partition,
                                    Py_ssize_t appended_bytes) except -1
    # first (if more than need) or need bytes if the pool has them now, else wait_size after
    # a wait; the size taken.
    cdef Py_ssize_t _memory(self, Py_ssize_t need, Py_ssize_t wait_size, double max_block_ms,
                            uint8_t** mem, Py_ssize_t first=*) except -1
    # A new batch on mem (need bytes from the pool, now owned by the batch, or given back if
    # this raises), last in dq.
    cdef ProducerBatch _new_batch(self, PartitionQueue dq, object tp, uint8_t* mem,
                                  Py_ssize_t need)
    # The record's future (None if aborted); flags gets the APPEND_* bits below.
    cdef FutureRecordMetadata _append(self, PartitionQueue dq, object tp, int64_t ts,
                                      object key, object value, bytes hbytes, int32_t hcount,
                                      int64_t header_size, Py_ssize_t size,
                                      double max_block_ms, bint abort_on_new_batch,
                                      int* flags)


# The error for a pool result other than BP_OK.
cdef int _raise_pool(int rc, Py_ssize_t need, double max_block_ms) except -1
