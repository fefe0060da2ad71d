"""SenderLoop: the produce half of the Sender's loop, as Java's Sender keeps it
(sendProduceRequest, handleProduceResponse, completeBatch and its in-flight batches).

It frames the ProduceRequest for the batches drained for one node and puts each batch's delivery
deadline on a TimingWheel, shared with the Sender's look at the accumulator's queues. The
request's callback (a ProduceResponseHandler, one call per response) decodes the response and
completes every acknowledged batch itself: the transaction manager's sequences, the muted
partition, the batch's futures and callbacks, its pool memory. Only what needs a decision goes
back to the Sender: a partition's error code (``on_partition(batch, result)``) and a failed
request or a partition the broker left out (``on_error(batch, error)``), which retry, split or
fail the batch. A steady produce stream thus runs no Python per batch or per record.

Each loop, fail_expired and send_producer_data (kcore/shared/sender_loop.py) fail the expired
batches and run the produce step: ready(), the nodes' connections, drain() and the requests.
on_fail(batch, error) fails a batch that expired or cannot be sent.
"""
from kcore.pure.produce_codec import decode_produce_response, encode_produce_body
from kcore.pure.timing_wheel import TimingWheel
from kcore.shared.sender_loop import _fail_expired, _run, _run_once, _send_producer_data
from kcore.errors import KafkaError, UnknownError

__all__ = ["SenderLoop", "ProduceResponseHandler", "QUEUE_SCAN"]

QUEUE_SCAN = "queue-scan"  # wheel item: look for expired batches in the accumulator's queues
_WHEEL_TICK_MS = 1
_WHEEL_SIZE = 64


class SenderLoop:
    def __init__(self, accumulator, transaction_manager, *, now, acks, request_timeout_ms,
                 delivery_timeout_ms, guarantee_order, on_partition, on_error,
                 on_piece_done=None, on_fail=None, net=None, transactional_id=None):
        self.accumulator = accumulator
        self.tm = transaction_manager
        self.net = net  # the NetworkClient's NetworkPoll: its data path
        self.transactional_id = transactional_id  # in every ProduceRequest, or None
        self.running = True  # the loop goes on while set (cleared by the Sender)
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
        self.requests = self.batches = self.records_sent = 0
        self._queue_scan = self.wheel.add(now, QUEUE_SCAN)
        self._queue_scan_ms = now

    def run(self, sender):
        """The Sender's loop while running: run_once, then sender.decide(now) when the
        producer id needs a decision."""
        _run(self, sender)

    def run_once(self, client, metadata, max_request_size):
        """One Sender loop (expiry, the produce step, the client's poll); None, or the time
        (ms) when the producer id needs the Sender's decision first (only expiry ran)."""
        return _run_once(self, client, metadata, max_request_size)

    # -- requests ---------------------------------------------------------------------------
    def send_producer_data(self, client, metadata, max_request_size, now):
        """The produce step of a Sender loop; returns the poll timeout (ms)."""
        return _send_producer_data(self, client, metadata, max_request_size, now)

    def request(self, version, batches, now):
        """(body, handler): the ProduceRequest body for batches drained for one node, and the
        callback for its response. KafkaError (nothing registered) if it cannot be framed."""
        body = encode_produce_body(version, self.acks, self.request_timeout_ms, self.transactional_id, [
            (b.topic_partition.topic, b.topic_partition.partition, b.payload) for b in batches])
        in_request = {}
        for batch in batches:
            in_request[batch.topic_partition] = batch
            self.in_flight[batch] = self.wheel.add(batch.created_ms + self.delivery_timeout_ms,
                                                   batch)
        self.requests += 1
        self.batches += len(batches)
        return body, ProduceResponseHandler(self, in_request, version)

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
        if self.tm is not None:
            self.tm.remove(batch, acked=True)
        self.records_sent += batch.record_count
        self.accumulator.complete(batch, base_offset, log_append_time)
        if self.split_parents:
            self.on_piece_done(batch)

    def counters(self):
        return {"request-total": self.requests, "batch-total": self.batches,
                "record-send-total": self.records_sent}


class ProduceResponseHandler:
    """The callback of one ProduceRequest: the NetworkClient calls it once with the response
    (``.error``, ``.body``)."""

    __slots__ = ("loop", "in_request", "version")

    def __init__(self, loop, in_request, version):
        self.loop, self.in_request, self.version = loop, in_request, version

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
            results, _ = decode_produce_response(self.version, response.body)
        except KafkaError as e:
            for batch in batches:
                loop.on_error(batch, e)
            return
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
