# SendPath (see send_path.pyx).
#
# Threads (the one place these rules are written): caller threads, with the GIL. No method is
# nogil and no field is read without the GIL. Fields are set in __init__ and only read after,
# but `closed` (set by KafkaProducer.close(), any thread).
from libc.stdint cimport int64_t

from kcore.record_accumulator cimport RecordAccumulator, TopicInfo
from kcore.selector cimport Waker
from kcore.transaction_manager cimport TransactionManager


cdef class SendPath:
    cdef RecordAccumulator accumulator
    cdef object wait_on_metadata, wakeup, partitioner, on_new_batch
    cdef Waker waker               # the Sender's Waker (C to C), or None: wakeup() is called
    cdef TransactionManager tm
    cdef object key_serializer, value_serializer
    cdef int64_t max_block_ms, max_request_size, buffer_memory
    cdef public bint closed
    cdef int fork_gen

    cdef int _check_usable(self) except -1
    # A batch started or filled: wake the Sender (C to C through its Waker when it has one).
    cdef int wake_sender(self) except -1
    # The partition the user partitioner gives, checked against the topic's partitions.
    cdef int _custom(self, topic, key, kb, value, vb, TopicInfo info) except -1
