# SenderLoop (see sender_loop.pyx): the Sender thread's loop, for every producer.
#
# Threads (the one place these rules are written): the Sender thread alone, attached (with the
# GIL on a GIL build). No method is nogil. Other threads only:
# - clear `running` and set `forced` (the properties over _running, _forced; KafkaProducer.close(),
#   any thread; then the Sender is woken): atomic (kc_load_int / kc_store_int on every access);
# - read requests, batches, records_sent (properties over _requests, _batches, _records_sent:
#   metrics' gauges, counters(), pyprod's TransactionManager): atomic, written by the Sender
#   only (kc_load_i64 then kc_store_i64);
# - call snapshot(now) (reset=False: it only reads), which reads the other metrics counters
#   (records_out through polls, and each TopicTally and NodeTally) under _counts_lock. The
#   Sender writes them under _counts_lock only (a PyMutex, a leaf: nothing else is taken under
#   it; the Sender runs only C updates and its own snapshot under it), and reads them as it
#   likes (the one writer). The *_max fields are reset by the Sender thread's own snapshots
#   only, under _counts_lock. No other thread reads them but through snapshot().
# - samples, totals, sample_every_ms, sample_due_ms are set by pyprod's ProducerMetrics before
#   the Sender thread starts; then the Sender alone uses them (samples: a deque, which locks
#   itself, popped by ProducerMetrics).
#
# Metrics counters (pyprod/producer_metrics.py turns them into kafka-python's metrics): kept per
# request (request()), per response (ProduceResponseHandler) and per poll (poll_net), never per
# record; totals since the start, except the *_max fields (since the last snapshot taken into
# `samples`). Every sample_every_ms poll_net appends a snapshot to `samples` (a deque the
# metrics set, or None: no snapshots), in C: the Sender thread runs no Python for metrics.
cimport cython
from libc.stdint cimport int64_t

from kcore.producer_batch cimport ProducerBatch
from kcore.timing_wheel cimport TimingWheel
from kcore.txn_partition_map cimport TxnPartitionMap


cdef class TopicTally:
    cdef public int64_t records, bytes, batches
    cdef public double ratio_sum


cdef class NodeTally:
    cdef public int64_t requests, request_bytes, request_max, responses, response_bytes
    cdef public int64_t latency_sum, latency_max, throttle_sum, throttle_max


cdef class SenderLoop:
    cdef public object accumulator      # a RecordAccumulator
    cdef public TxnPartitionMap txn_partitions  # the idempotent producer's sequences, or None
    cdef public object net             # the NetworkClient's NetworkPoll: its data path
    cdef public object transactional_id  # in every ProduceRequest (str), or None
    cdef int _running                  # `running`: the loop goes on while set (atomic)
    cdef int _forced                   # `forced`: close now, nothing more is sent (atomic)
    cdef public TimingWheel wheel
    cdef public int acks
    cdef public int64_t request_timeout_ms, delivery_timeout_ms
    cdef public bint guarantee_order
    cdef public object on_partition, on_error, on_piece_done, on_fail
    cdef public dict split_parents   # half of a batch split on MESSAGE_TOO_LARGE -> the batch
    cdef public dict in_flight       # batch -> wheel handle of its delivery deadline
    cdef public dict sent_us         # node -> when its last ProduceRequest went (now_us)
    cdef int64_t _requests, _batches, _records_sent  # requests, batches, records_sent (atomic)
    cdef cython.pymutex _counts_lock            # the counters below and the tallies
    cdef public int64_t records_out, bytes_out  # records and batch bytes in requests (resends too)
    cdef public bint compressed                 # the accumulator's batches are compressed:
                                                # their uncompressed size is its upper bound
    cdef public double ratio_sum                # per batch: built bytes / uncompressed bytes
    cdef public double record_size_sum          # per batch: its mean record size (uncompressed)
    cdef public int64_t queue_ms_sum            # per batch: drained - created
    cdef public int64_t batch_max, queue_ms_max
    cdef public double record_size_max
    cdef public int64_t poll_ns, polls          # time in the network poll (waiting and its I/O)
    cdef public dict topic_tallies              # topic -> TopicTally
    cdef public dict node_tallies               # node id -> NodeTally
    cdef public object samples                  # a deque of snapshot()s, or None
    cdef public object totals                   # the Sender's Counter (retries, errors), or None
    cdef public int64_t sample_every_ms, sample_due_ms
    cdef object _queue_scan          # the wheel handle of the next look at the queues, or None
    cdef int64_t _queue_scan_ms

    # True if the batch was still waiting for its request (not expired): its deadline goes.
    cdef bint landed_c(self, ProducerBatch batch) except -1
    cdef int _count_batch(self, ProducerBatch batch) except -1
    cdef int _count_request(self, node, list body) except -1
    cdef int _count_response(self, node, response, int64_t throttle_ms) except -1
    cdef NodeTally _node_tally(self, node)
    cdef int succeed_c(self, ProducerBatch batch, int64_t base_offset,
                       int64_t log_append_time) except -1


cdef class ProduceResponseHandler:
    cdef SenderLoop loop
    cdef dict in_request             # topic partition -> batch
    cdef int version
    cdef object node                 # where the request went (counted), or None
