# cython: binding=False
"""Compiled twin of kcore/pure/sender_loop.py (see it for the design).

Completion runs here, in C, once per response: no Python per batch or per record."""
from libc.stdint cimport INT64_MAX, int32_t, int64_t

from kcore.atomic_impl cimport kc_load_i64, kc_load_int, kc_store_i64, kc_store_int
from kcore.producer_batch cimport ProducerBatch
from kcore.timing_wheel cimport TimingWheel
from kcore.txn_partition_map cimport TxnPartitionMap

from kcore.produce_codec import decode_produce_response, encode_produce_body
from kcore.errors import KafkaError, UnknownError
from time import monotonic_ns

include "_sender_loop.py"  # the loop: its steps, the closing drain

__all__ = ["SenderLoop", "ProduceResponseHandler", "QUEUE_SCAN"]

QUEUE_SCAN = "queue-scan"  # wheel item: look for expired batches in the accumulator's queues
cdef int64_t _WHEEL_TICK_MS = 1
cdef int _WHEEL_SIZE = 64
cdef Py_ssize_t _BATCH_HEADER = 61  # a v2 batch's header: what its records' mean size leaves out


cdef class SenderLoop:
    def __init__(self, accumulator, txn_partitions, *, int64_t now,
                 int acks, int64_t request_timeout_ms, int64_t delivery_timeout_ms,
                 bint guarantee_order, on_partition, on_error, on_piece_done=None,
                 on_fail=None, net=None, transactional_id=None):
        self.accumulator = accumulator
        self.txn_partitions = txn_partitions
        self.net = net
        self.transactional_id = transactional_id
        kc_store_int(&self._running, 1)
        kc_store_int(&self._forced, 0)
        self.wheel = TimingWheel(_WHEEL_TICK_MS, _WHEEL_SIZE, now)
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.guarantee_order = guarantee_order
        self.on_partition, self.on_error = on_partition, on_error
        self.on_piece_done = on_piece_done
        self.on_fail = on_fail
        self.split_parents, self.in_flight, self.sent_us = {}, {}, {}
        kc_store_i64(&self._requests, 0)
        kc_store_i64(&self._batches, 0)
        kc_store_i64(&self._records_sent, 0)
        self.topic_tallies, self.node_tallies = {}, {}
        self.compressed = accumulator is not None and accumulator.compression_type is not None
        self.sample_every_ms, self.sample_due_ms = 1000, INT64_MAX
        self._queue_scan = self.wheel.add_c(now, QUEUE_SCAN)
        self._queue_scan_ms = now

    # -- what other threads read (sender_loop.pxd) -------------------------------------------
    @property
    def running(self):
        return <bint>kc_load_int(&self._running)

    @running.setter
    def running(self, bint value):
        kc_store_int(&self._running, value)

    @property
    def forced(self):
        return <bint>kc_load_int(&self._forced)

    @forced.setter
    def forced(self, bint value):
        kc_store_int(&self._forced, value)

    @property
    def requests(self):
        return kc_load_i64(&self._requests)

    @requests.setter
    def requests(self, int64_t value):
        kc_store_i64(&self._requests, value)

    @property
    def batches(self):
        return kc_load_i64(&self._batches)

    @batches.setter
    def batches(self, int64_t value):
        kc_store_i64(&self._batches, value)

    @property
    def records_sent(self):
        return kc_load_i64(&self._records_sent)

    @records_sent.setter
    def records_sent(self, int64_t value):
        kc_store_i64(&self._records_sent, value)

    def run(self, sender):
        """The Sender thread's loop, then its closing drain and shutdown (one catch-all)."""
        _run(self, sender)

    def step(self, sender):
        """One loop (its errors raised): the transactional step, run_once, sender.decide."""
        _pass(self, sender, sender.transaction_manager)

    def run_once(self, client, metadata, Py_ssize_t max_request_size):
        """One Sender loop (expiry, the produce step, the client's poll); None, or the time
        (ms) when the producer id needs the Sender's decision first (only expiry ran)."""
        return _run_once(self, client, metadata, max_request_size)

    # -- requests ---------------------------------------------------------------------------
    def send_producer_data(self, client, metadata, Py_ssize_t max_request_size, int64_t now):
        """The produce step of a Sender loop; returns the poll timeout (ms)."""
        return _send_producer_data(self, client, metadata, max_request_size, now)

    def request(self, int version, list batches, int64_t now, node=None):
        cdef ProducerBatch batch
        cdef dict in_request = {}
        body = encode_produce_body(version, self.acks, self.request_timeout_ms,
                                   self.transactional_id, [
            (b.topic_partition.topic, b.topic_partition.partition, b.payload) for b in batches])
        for batch in batches:
            in_request[batch.topic_partition] = batch
            self.in_flight[batch] = self.wheel.add_c(
                batch.created_ms + self.delivery_timeout_ms, batch)
            self._count_batch(batch)
        kc_store_i64(&self._requests, kc_load_i64(&self._requests) + 1)
        kc_store_i64(&self._batches, kc_load_i64(&self._batches) + len(batches))
        if node is not None:
            self._count_request(node, body)
        cdef ProduceResponseHandler handler = ProduceResponseHandler.__new__(
            ProduceResponseHandler)
        handler.loop, handler.in_request, handler.version = self, in_request, version
        handler.node = node
        return body, handler

    def poll_net(self, timeout, int64_t now):
        """The loop's network poll, timed (poll_ns); then a snapshot into samples if due."""
        cdef int64_t start = monotonic_ns()
        self.net.poll(timeout)
        cdef int64_t spent = monotonic_ns() - start
        cdef bint sample = now >= self.sample_due_ms and self.samples is not None
        when = self.net.now_ms() if sample else None
        with self._counts_lock:
            self.poll_ns += spent
            self.polls += 1
            if sample:  # under the lock: a reader never sees the *_max fields half reset
                self.sample_due_ms = now + self.sample_every_ms
                self.samples.append(_snapshot(self, when, True))

    def snapshot(self, int64_t now):
        """(now, the loop's counters, {topic: its counters}, {node: its counters}, the Sender's
        totals): the metrics counters now, as dicts (sender_loop.pxd); reads only."""
        with self._counts_lock:
            return _snapshot(self, now, False)

    # -- metrics counters (sender_loop.pxd) ---------------------------------------------------
    cdef int _count_batch(self, ProducerBatch batch) except -1:
        cdef Py_ssize_t size = len(batch.payload)
        cdef Py_ssize_t raw = batch.size if self.compressed else size
        cdef int32_t n = batch.record_count
        cdef double ratio = <double>size / raw if raw > 0 else 1.0
        cdef double mean = <double>(raw - _BATCH_HEADER) / n if n > 0 else 0.0
        cdef int64_t queued = 0
        cdef bint drained = batch.drained_ms is not None
        cdef TopicTally tally
        if drained:
            queued = <int64_t>batch.drained_ms - batch.created_ms
        topic = batch.topic_partition.topic
        tally = self.topic_tallies.get(topic)
        if tally is None:
            tally = self.topic_tallies[topic] = TopicTally()
        with self._counts_lock:
            self.records_out += n
            self.bytes_out += size
            self.ratio_sum += ratio
            self.record_size_sum += mean
            self.batch_max = max(self.batch_max, size)
            self.record_size_max = max(self.record_size_max, mean)
            if drained:
                self.queue_ms_sum += queued
                self.queue_ms_max = max(self.queue_ms_max, queued)
            tally.records += n
            tally.bytes += size
            tally.batches += 1
            tally.ratio_sum += ratio
        return 0

    cdef int _count_request(self, node, list body) except -1:
        cdef Py_ssize_t size = 0
        cdef NodeTally tally = self._node_tally(node)
        for piece in body:
            size += len(piece)
        with self._counts_lock:
            tally.requests += 1
            tally.request_bytes += size
            tally.request_max = max(tally.request_max, size)
        return 0

    cdef int _count_response(self, node, response, int64_t throttle_ms) except -1:
        cdef NodeTally tally = self._node_tally(node)
        cdef int64_t latency = response.latency_ms
        cdef Py_ssize_t size = len(response.body)
        with self._counts_lock:
            tally.responses += 1
            tally.response_bytes += size
            tally.latency_sum += latency
            tally.latency_max = max(tally.latency_max, latency)
            tally.throttle_sum += throttle_ms
            tally.throttle_max = max(tally.throttle_max, throttle_ms)
        return 0

    cdef NodeTally _node_tally(self, node):
        tally = self.node_tallies.get(node)
        if tally is None:
            tally = self.node_tallies[node] = NodeTally()
        return tally

    def landed(self, ProducerBatch batch):
        return self.landed_c(batch)

    cdef bint landed_c(self, ProducerBatch batch) except -1:
        handle = self.in_flight.pop(batch, None)
        if handle is None:
            return False
        self.wheel.cancel_c(handle)
        return True

    # -- deadlines ---------------------------------------------------------------------------
    def fail_expired(self, int64_t now):
        """Fail (on_fail) every batch past its delivery timeout, in flight or queued."""
        _fail_expired(self, now)

    def expire(self, int64_t now):
        cdef list expired = []
        cdef bint scan = False
        for item in self.wheel.advance_c(now):
            if item is QUEUE_SCAN:
                scan, self._queue_scan = True, None
            elif self.in_flight.pop(item, None) is not None:
                expired.append(item)
        return expired, scan

    def schedule_queue_scan(self, int64_t now, at):
        cdef int64_t when = max(<int64_t>int(at), now)
        if self._queue_scan is not None:
            if self._queue_scan_ms <= when:
                return
            self.wheel.cancel_c(self._queue_scan)
        self._queue_scan = self.wheel.add_c(when, QUEUE_SCAN)
        self._queue_scan_ms = when

    def next_deadline_delay(self, int64_t now):
        cdef int64_t deadline
        if not self.wheel.next_deadline_c(&deadline):
            return self.delivery_timeout_ms
        return max(deadline - now, 0)

    # -- completion --------------------------------------------------------------------------
    def succeed(self, ProducerBatch batch, int64_t base_offset, int64_t log_append_time):
        self.succeed_c(batch, base_offset, log_append_time)

    cdef int succeed_c(self, ProducerBatch batch, int64_t base_offset,
                       int64_t log_append_time) except -1:
        if self.guarantee_order:
            self.accumulator.unmute(batch.topic_partition)
        if self.txn_partitions is not None:
            self.txn_partitions.remove_c(batch, True)
        kc_store_i64(&self._records_sent, kc_load_i64(&self._records_sent) + batch.record_count)
        self.accumulator.complete(batch, base_offset, log_append_time)
        if self.split_parents:
            self.on_piece_done(batch)
        return 0

    def counters(self):
        return {"request-total": kc_load_i64(&self._requests),
                "batch-total": kc_load_i64(&self._batches),
                "record-send-total": kc_load_i64(&self._records_sent)}


cdef class TopicTally:
    """A topic's metrics counters (sender_loop.pxd)."""


cdef class NodeTally:
    """A node's metrics counters (sender_loop.pxd)."""


cdef class ProduceResponseHandler:
    """The callback of one ProduceRequest: called once with the response (.error, .body)."""

    def __call__(self, response):
        cdef SenderLoop loop = self.loop
        cdef ProducerBatch batch
        cdef list batches = []
        cdef dict pending
        cdef tuple result
        for batch in self.in_request.values():
            if loop.landed_c(batch):
                batches.append(batch)
        error = response.error
        if error is not None:
            for batch in batches:
                loop.on_error(batch, error)
            return
        if loop.acks == 0:  # no response: sent is done
            for batch in batches:
                loop.succeed_c(batch, -1, -1)
            return
        try:
            results, throttle_ms = decode_produce_response(self.version, response.body)
        except KafkaError as e:
            for batch in batches:
                loop.on_error(batch, e)
            return
        if self.node is not None:
            loop._count_response(self.node, response, throttle_ms)
        pending = {batch.topic_partition: batch for batch in batches}
        for result in results:
            batch = pending.pop(result[:2], None)
            if batch is None:
                continue
            if result[2] == 0:
                loop.succeed_c(batch, result[3], result[4])
            else:
                loop.on_partition(batch, result)
        for batch in pending.values():  # the broker left a partition out
            loop.on_error(batch, UnknownError(
                "No response for %s in ProduceResponse" % (batch.topic_partition,)))
