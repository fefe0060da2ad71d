# SenderLoop (see sender_loop.pyx): the produce half of the Sender's loop.
#
# Threads (the one place these rules are written): the Sender thread alone, with the GIL. No
# method is nogil and no field is read without the GIL. Other threads only read the counters
# (requests, batches, records_sent), with the GIL (KafkaProducer.metrics()), and clear
# `running` (KafkaProducer.close(), any thread, with the GIL; then the Sender is woken).
from libc.stdint cimport int64_t

from kcore.producer_batch cimport ProducerBatch
from kcore.timing_wheel cimport TimingWheel
from kcore.transaction_manager cimport TransactionManager


cdef class SenderLoop:
    cdef public object accumulator      # a RecordAccumulator
    cdef public TransactionManager tm  # the idempotent producer's sequences, or None
    cdef public object net             # the NetworkClient's NetworkPoll: its data path
    cdef public object transactional_id  # in every ProduceRequest (str), or None
    cdef public bint running           # the loop goes on while set (cleared by the Sender)
    cdef public TimingWheel wheel
    cdef public int acks
    cdef public int64_t request_timeout_ms, delivery_timeout_ms
    cdef public bint guarantee_order
    cdef public object on_partition, on_error, on_piece_done, on_fail
    cdef public dict split_parents   # half of a batch split on MESSAGE_TOO_LARGE -> the batch
    cdef public dict in_flight       # batch -> wheel handle of its delivery deadline
    cdef public int64_t requests, batches, records_sent
    cdef object _queue_scan          # the wheel handle of the next look at the queues, or None
    cdef int64_t _queue_scan_ms

    # True if the batch was still waiting for its request (not expired): its deadline goes.
    cdef bint landed_c(self, ProducerBatch batch) except -1
    cdef int succeed_c(self, ProducerBatch batch, int64_t base_offset,
                       int64_t log_append_time) except -1


cdef class ProduceResponseHandler:
    cdef SenderLoop loop
    cdef dict in_request             # topic partition -> batch
    cdef int version
