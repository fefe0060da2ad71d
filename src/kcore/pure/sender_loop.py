"""SenderLoop: the Sender thread's one loop, for every producer (Java's Sender.run and runOnce:
a transactional producer's step, the produce step, the closing drain; the one catch-all
handler), and what Java's Sender keeps for the produce half (sendProduceRequest,
handleProduceResponse, completeBatch and its in-flight batches).

It frames the ProduceRequest for the batches drained for one node and puts each batch's delivery
deadline on a TimingWheel, shared with the Sender's look at the accumulator's queues. The
request's callback (a ProduceResponseHandler, one call per response) decodes the response and
completes every acknowledged batch itself: the TxnPartitionMap's sequences, the muted
partition, the batch's futures and callbacks, its pool memory. Only what needs a decision goes
back to the Sender: a partition's error code (``on_partition(batch, result)``) and a failed
request or a partition the broker left out (``on_error(batch, error)``), which retry, split or
fail the batch. A steady produce stream thus runs no Python per batch or per record.

Each loop (kcore/_sender_loop.py) runs a transactional producer's TransactionManager step
first, then fail_expired and send_producer_data fail the expired batches and run the produce
step: ready(), the nodes' connections, drain() and the requests. on_fail(batch, error) fails a
batch that expired or cannot be sent. Once running is cleared, the loop sends what is left
(unless forced) and shuts the network down.
"""
from time import monotonic_ns

from kcore.pure.produce_codec import decode_produce_response, encode_produce_body
from kcore.pure.timing_wheel import TimingWheel
from kcore._sender_loop import (_fail_expired, _pass, _run, _run_once,
                                      _send_producer_data, _snapshot)
from kcore.errors import KafkaError, UnknownError

__all__ = ["SenderLoop", "ProduceResponseHandler", "QUEUE_SCAN"]

QUEUE_SCAN = "queue-scan"  # wheel item: look for expired batches in the accumulator's queues
_WHEEL_TICK_MS = 1
_WHEEL_SIZE = 64
_BATCH_HEADER = 61  # a v2 batch's header: what its records' mean size leaves out
_INT64_MAX = 2 ** 63 - 1


class SenderLoop:
    def __init__(self, accumulator, txn_partitions, *, now, acks, request_timeout_ms,
                 delivery_timeout_ms, guarantee_order, on_partition, on_error,
                 on_piece_done=None, on_fail=None, net=None, transactional_id=None):
        self.accumulator = accumulator
        self.txn_partitions = txn_partitions
        self.net = net  # the NetworkClient's NetworkPoll: its data path
        self.transactional_id = transactional_id  # in every ProduceRequest, or None
        self.running = True  # the loop goes on while set (cleared by the Sender)
        self.forced = False  # close now: nothing more is sent (set by the Sender)
        self.wheel = TimingWheel(_WHEEL_TICK_MS, _WHEEL_SIZE, now)
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.guarantee_order = guarantee_order
        self.on_partition, self.on_error = on_partition, on_error
        self.on_piece_done = on_piece_done
        self.on_fail = on_fail
        self.split_parents = {}  # half of a batch split on MESSAGE_TOO_LARGE -> the batch
        self.in_flight = {}  # batch -> wheel handle of its delivery deadline
        self.sent_us = {}  # node -> when its last ProduceRequest went (the loop's now_us)
        self.requests = self.batches = self.records_sent = 0
        # metrics counters (kcore/sender_loop.pxd): per request, response and poll
        self.records_out = self.bytes_out = self.queue_ms_sum = 0
        self.ratio_sum = self.record_size_sum = self.record_size_max = 0.0
        self.batch_max = self.queue_ms_max = self.poll_ns = self.polls = 0
        self.topic_tallies, self.node_tallies = {}, {}
        # compressed batches: their uncompressed size is known as its upper bound only
        self.compressed = accumulator is not None and accumulator.compression_type is not None
        self.samples = self.totals = None  # a deque of snapshot()s; the Sender's Counter
        self.sample_every_ms, self.sample_due_ms = 1000, _INT64_MAX
        self._queue_scan = self.wheel.add(now, QUEUE_SCAN)
        self._queue_scan_ms = now

    def run(self, sender):
        """The Sender thread's loop, then its closing drain and shutdown (one catch-all)."""
        _run(self, sender)

    def step(self, sender):
        """One loop (its errors raised): the transactional step, run_once, sender.decide."""
        _pass(self, sender, sender.transaction_manager)

    def run_once(self, client, metadata, max_request_size):
        """One Sender loop (expiry, the produce step, the client's poll); None, or the time
        (ms) when the producer id needs the Sender's decision first (only expiry ran)."""
        return _run_once(self, client, metadata, max_request_size)

    # -- requests ---------------------------------------------------------------------------
    def send_producer_data(self, client, metadata, max_request_size, now):
        """The produce step of a Sender loop; returns the poll timeout (ms)."""
        return _send_producer_data(self, client, metadata, max_request_size, now)

    def request(self, version, batches, now, node=None):
        """(body, handler): the ProduceRequest body for batches drained for one node, and the
        callback for its response. KafkaError (nothing registered) if it cannot be framed."""
        body = encode_produce_body(version, self.acks, self.request_timeout_ms, self.transactional_id, [
            (b.topic_partition.topic, b.topic_partition.partition, b.payload) for b in batches])
        in_request = {}
        for batch in batches:
            in_request[batch.topic_partition] = batch
            self.in_flight[batch] = self.wheel.add(batch.created_ms + self.delivery_timeout_ms,
                                                   batch)
            self._count_batch(batch)
        self.requests += 1
        self.batches += len(batches)
        if node is not None:
            self._count_request(node, body)
        return body, ProduceResponseHandler(self, in_request, version, node)

    def poll_net(self, timeout, now):
        """The loop's network poll, timed (poll_ns); then a snapshot into samples if due."""
        start = monotonic_ns()
        self.net.poll(timeout)
        self.poll_ns += monotonic_ns() - start
        self.polls += 1
        if now >= self.sample_due_ms and self.samples is not None:
            self.sample_due_ms = now + self.sample_every_ms
            self.samples.append(_snapshot(self, self.net.now_ms(), True))

    def snapshot(self, now):
        """(now, the loop's counters, {topic: its counters}, {node: its counters}, the Sender's
        totals): the metrics counters now, as dicts (kcore/sender_loop.pxd); reads only."""
        return _snapshot(self, now, False)

    # -- metrics counters (kcore/sender_loop.pxd) ---------------------------------------------
    def _count_batch(self, batch):
        size, n = len(batch.payload), batch.record_count
        raw = batch.size if self.compressed else size
        ratio = size / raw if raw > 0 else 1.0
        mean = (raw - _BATCH_HEADER) / n if n > 0 else 0.0
        self.records_out += n
        self.bytes_out += size
        self.ratio_sum += ratio
        self.record_size_sum += mean
        self.batch_max = max(self.batch_max, size)
        self.record_size_max = max(self.record_size_max, mean)
        if batch.drained_ms is not None:
            queued = batch.drained_ms - batch.created_ms
            self.queue_ms_sum += queued
            self.queue_ms_max = max(self.queue_ms_max, queued)
        tally = self.topic_tallies.get(batch.topic_partition.topic)
        if tally is None:
            tally = self.topic_tallies[batch.topic_partition.topic] = TopicTally()
        tally.records += n
        tally.bytes += size
        tally.batches += 1
        tally.ratio_sum += ratio

    def _count_request(self, node, body):
        size = sum(len(piece) for piece in body)
        tally = self._node_tally(node)
        tally.requests += 1
        tally.request_bytes += size
        tally.request_max = max(tally.request_max, size)

    def _count_response(self, node, response, throttle_ms):
        tally = self._node_tally(node)
        tally.responses += 1
        tally.response_bytes += len(response.body)
        tally.latency_sum += response.latency_ms
        tally.latency_max = max(tally.latency_max, response.latency_ms)
        tally.throttle_sum += throttle_ms
        tally.throttle_max = max(tally.throttle_max, throttle_ms)

    def _node_tally(self, node):
        tally = self.node_tallies.get(node)
        if tally is None:
            tally = self.node_tallies[node] = NodeTally()
        return tally

    def landed(self, batch):
        """The batch's request completed: True if it was still waiting for it (not expired)."""
        handle = self.in_flight.pop(batch, None)
        if handle is None:
            return False
        self.wheel.cancel(handle)
        return True

    # -- deadlines ---------------------------------------------------------------------------
    def fail_expired(self, now):
        """Fail (on_fail) every batch past its delivery timeout, in flight or queued."""
        _fail_expired(self, now)

    def expire(self, now):
        """(batches whose delivery deadline passed in flight, queue scan due now)."""
        expired, scan = [], False
        for item in self.wheel.advance(now):
            if item is QUEUE_SCAN:
                scan, self._queue_scan = True, None
            elif self.in_flight.pop(item, None) is not None:  # its request is still out
                expired.append(item)
        return expired, scan

    def schedule_queue_scan(self, now, at):
        """Look at the queues at `at`, unless a look is already due by then."""
        at = max(int(at), now)
        if self._queue_scan is not None:
            if self._queue_scan_ms <= at:
                return
            self.wheel.cancel(self._queue_scan)
        self._queue_scan = self.wheel.add(at, QUEUE_SCAN)
        self._queue_scan_ms = at

    def next_deadline_delay(self, now):
        deadline = self.wheel.next_deadline()
        return self.delivery_timeout_ms if deadline is None else max(deadline - now, 0)

    # -- completion --------------------------------------------------------------------------
    def succeed(self, batch, base_offset, log_append_time):
        if self.guarantee_order:
            self.accumulator.unmute(batch.topic_partition)
        if self.txn_partitions is not None:
            self.txn_partitions.remove(batch, acked=True)
        self.records_sent += batch.record_count
        self.accumulator.complete(batch, base_offset, log_append_time)
        if self.split_parents:
            self.on_piece_done(batch)

    def counters(self):
        return {"request-total": self.requests, "batch-total": self.batches,
                "record-send-total": self.records_sent}


class TopicTally:
    """A topic's metrics counters (kcore/sender_loop.pxd)."""
    __slots__ = ("records", "bytes", "batches", "ratio_sum")

    def __init__(self):
        self.records = self.bytes = self.batches = 0
        self.ratio_sum = 0.0


class NodeTally:
    """A node's metrics counters (kcore/sender_loop.pxd)."""
    __slots__ = ("requests", "request_bytes", "request_max", "responses", "response_bytes",
                 "latency_sum", "latency_max", "throttle_sum", "throttle_max")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)


class ProduceResponseHandler:
    """The callback of one ProduceRequest: the NetworkClient calls it once with the response
    (``.error``, ``.body``)."""

    __slots__ = ("loop", "in_request", "version", "node")

    def __init__(self, loop, in_request, version, node=None):
        self.loop, self.in_request, self.version = loop, in_request, version
        self.node = node  # where the request went (counted), or None

    def __call__(self, response):
        loop = self.loop
        batches = [b for b in self.in_request.values() if loop.landed(b)]
        if response.error is not None:
            for batch in batches:
                loop.on_error(batch, response.error)
            return
        if loop.acks == 0:  # no response: sent is done
            for batch in batches:
                loop.succeed(batch, -1, -1)
            return
        try:
            results, throttle_ms = decode_produce_response(self.version, response.body)
        except KafkaError as e:
            for batch in batches:
                loop.on_error(batch, e)
            return
        if self.node is not None:
            loop._count_response(self.node, response, throttle_ms)
        pending = {b.topic_partition: b for b in batches}
        for result in results:
            batch = pending.pop(result[:2], None)
            if batch is None:
                continue
            if result[2] == 0:
                loop.succeed(batch, result[3], result[4])
            else:
                loop.on_partition(batch, result)
        for batch in pending.values():  # the broker left a partition out
            loop.on_error(batch, UnknownError(
                "No response for %s in ProduceResponse" % (batch.topic_partition,)))
