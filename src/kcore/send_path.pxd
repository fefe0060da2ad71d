# SendPath (see send_path.pyx).
#
# Threads (the one place these rules are written): caller threads, attached (with the GIL on a
# GIL build). No method is nogil. Fields are set in __init__ and only read after, but `_closed`
# (the `closed` property: set by KafkaProducer.close(), any thread; atomic, kc_load_int /
# kc_store_int on every access). The transaction manager's fatal_error and send_refusal are
# read through its accessors, under its lock (txn_partition_map.pxd).
# divert_var, divert_key, divert_send: set by divert() (pyprod.otel's instrument(), on the
# thread that calls it), read by send() on caller threads without a lock (a stale read sends
# one record the other way; the values replaced stay referenced in old_diverts, so that a
# free-threaded reader never takes a reference to a freed object).
# Fork: fork_gen is kc_fork_generation() when made; in a forked child (they differ) send()
# hands the call to on_fork()'s SendPath (KafkaProducer's, rebuilt in the child; see
# docs/fork.md), or raises IllegalStateError without on_fork. Nothing here is re-made.
from libc.stdint cimport int32_t, int64_t

from kcore.record_accumulator cimport RecordAccumulator, TopicInfo
from kcore.selector cimport Waker
from kcore.txn_partition_map cimport TxnPartitionMap


cdef class SendPath:
    cdef RecordAccumulator accumulator
    cdef object wait_on_metadata, wakeup, partitioner, on_new_batch, on_fork
    cdef Waker waker               # the Sender's Waker (C to C), or None: wakeup() is called
    cdef TxnPartitionMap txn_partitions
    cdef object key_serializer, value_serializer
    cdef int64_t max_block_ms, max_request_size, buffer_memory
    cdef int _closed                 # `closed` (atomic)
    cdef int fork_gen
    cdef object divert_var, divert_key, divert_send  # see divert()
    cdef list old_diverts

    cdef int _check_usable(self) except -1   # closed, fatal errors (not the fork: _in_child)
    cdef object _in_child(self)               # the SendPath to use in a forked child
    cdef int _diverted(self) except -1          # divert_var's value holds divert_key
    cdef object _send(self, topic, value, key, headers, partition, timestamp_ms)  # no divert
    # _send's partition and append; info borrowed (the caller keeps it alive)
    cdef object _place(self, TopicInfo info, topic, key, value, kb, vb, int64_t ts, int part,
                       bytes hbytes, int32_t hcount, int64_t header_size,
                       Py_ssize_t hbytes_len, double remaining)
    # A batch started or filled: wake the Sender (C to C through its Waker when it has one).
    cdef int wake_sender(self) except -1
    # The partition the user partitioner gives, checked against the topic's partitions.
    cdef int _custom(self, topic, key, kb, value, vb, TopicInfo info) except -1
