# RecordAccumulator and TopicInfo (see record_accumulator.pyx): cimported by send_path and
# batch_send.
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.buffer_pool cimport BufferPool
from kcore.builtin_partitioner cimport BuiltInPartitioner
from kcore.producer_batch cimport ProducerBatch
from kcore.transaction_manager cimport TransactionManager


cdef class TopicInfo:
    cdef public str topic
    cdef public int64_t version
    cdef public int num_partitions
    cdef public list tps
    cdef public list deques
    cdef public BuiltInPartitioner partitioner   # the sticky partition for null keys


cdef class RecordAccumulator:
    cdef public Py_ssize_t batch_size
    cdef public Py_ssize_t batch_max_size    # an open batch grows up to this (>= batch_size)
    cdef public int64_t linger_ms, retry_backoff_ms, delivery_timeout_ms
    cdef public object compression_type
    cdef public BufferPool pool
    cdef public object metadata
    cdef public TransactionManager tm  # idempotence's sequences, or None
    cdef public set muted
    cdef dict _topics, _deques
    cdef set _incomplete
    cdef int _flushes
    cdef bint _closed
    cdef Py_ssize_t _drain_index
    cdef object _seeds   # random.Random(seed) for the partitioners' seeds, or None

    cdef TopicInfo _topic_info(self, str topic)
    # After a null-key append: the partitioner switches once the partition's batches are full.
    cdef int _update_partition_info(self, TopicInfo info, int partition,
                                    Py_ssize_t appended_bytes) except -1
    # A new batch on mem (need bytes from the pool, now owned by the batch), last in dq.
    cdef ProducerBatch _new_batch(self, object dq, object tp, uint8_t* mem, Py_ssize_t need)
    cdef tuple _append(self, object dq, object tp, int64_t ts, object key, object value,
                       bytes hbytes, int32_t hcount, int64_t header_size, Py_ssize_t size,
                       double max_block_ms, bint abort_on_new_batch)
    # The head batch of dq may go, backoff aside (full, or grown if busy; lingered; pressed).
    cdef bint _sendable(self, object dq, int64_t now, bint busy) except -1
    cdef list _drain_node(self, parts, Py_ssize_t max_size, int64_t now, bint busy)


# The error for a pool result other than BP_OK.
cdef int _raise_pool(int rc, Py_ssize_t need, double max_block_ms) except -1
