"""Sender: the producer's I/O thread (Java's producer.internals.Sender). Each loop: a
transactional producer's step (its TransactionManager's requests, one at a time), expire what is
due, metadata as needed, ready(), drain(), send ProduceRequests (pipelined up to max_in_flight
per connection), complete or retry batches, then poll for at most min(linger or backoff left,
node delay, next expiry).

The thread runs kcore's SenderLoop.run, the one loop for every producer, which owns the loop,
its running state, its closing drain and its one catch-all handler: each pass is the
transactional step, expiry, ready() and drain() (one section for both choices, without the GIL
for many queues), the requests, then the NetworkClient's poll (kcore's NetworkPoll); it frames
the requests, keeps the batches in flight and completes the acknowledged ones in C, once per
response. A steady produce stream thus runs no Python bytecode in this thread but the user's
callbacks (tests/integration/test_sender_steady_state.py). What needs a decision comes back
here: the producer id (decide), a partition's error (retry, split, reset the producer id, fail),
a failed request, a batch of an aborted transaction (abort_batch).

Deadlines sit in the SenderLoop's TimingWheel, one entry per batch in flight (its delivery
deadline, cancelled when the response comes) plus one entry for the next look at the
accumulator's queues (the oldest queued batch's deadline, at most a second ahead), so the loop
never scans every deque for expiry; the wheel's next deadline bounds the poll. Request
timeouts are the NetworkClient's; linger and retry backoff come from ready(), which looks at
each deque anyway.
"""
import collections
import logging
import threading

from kcore import SenderLoop, now_ms, piece_errors
from pyprod import errors
from pyprod.protocol import init_producer_id

log = logging.getLogger(__name__)


def _init_pid_refused(error):
    """Why every send fails when the broker refuses the idempotent producer's id (Java does not
    fall back to non-idempotent sends either)."""
    if error is errors.ClusterAuthorizationFailedError:
        return ("InitProducerId refused: idempotence (the default) needs the IdempotentWrite "
                "cluster ACL on brokers before Apache Kafka 2.8 (topic WRITE is enough from "
                "2.8): grant it (kafka-acls --add --allow-principal ... --operation "
                "IdempotentWrite --cluster) or set enable_idempotence=False")
    return "InitProducerId failed"


class Sender(threading.Thread):
    def __init__(self, client, metadata, accumulator, *, client_id, acks, retries,
                 request_timeout_ms, max_request_size, retry_backoff_ms, delivery_timeout_ms,
                 transaction_timeout_ms, max_in_flight_requests_per_connection,
                 txn_partitions=None, metrics=None, sender_loop=SenderLoop,
                 transactional_id=None):
        """sender_loop: the SenderLoop class, of the accumulator's implementation;
        transactional_id: a transactional producer's (then set_transactions() before start)."""
        super().__init__(name="pyprod-sender-" + client_id, daemon=True)
        self.client = client
        self.metadata = metadata
        self.accumulator = accumulator
        self.txn_partitions = txn_partitions
        self.transaction_manager = None  # a transactional producer's pyprod TransactionManager
        self.metrics = metrics if metrics is not None else collections.Counter()
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.max_request_size = max_request_size
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.transaction_timeout_ms = transaction_timeout_ms
        # Without idempotence, max_in_flight=1 keeps order by muting a partition while it sends
        # (Java's rule); keep_partition_order() mutes with any max_in_flight.
        self.guarantee_order = txn_partitions is None and \
            max_in_flight_requests_per_connection == 1
        self._init_pid_in_flight = False
        self._init_pid_not_before = 0
        self.produce_loop = sender_loop(
            accumulator, txn_partitions, now=now_ms(), acks=acks,
            request_timeout_ms=request_timeout_ms, delivery_timeout_ms=delivery_timeout_ms,
            guarantee_order=self.guarantee_order, on_partition=self._on_partition,
            on_error=self._on_error, on_piece_done=self._piece_done, on_fail=self._fail,
            net=client.network_poll, transactional_id=transactional_id)
        self._split_parents = self.produce_loop.split_parents

    # -- lifecycle --------------------------------------------------------------------------
    def keep_partition_order(self):
        """One batch of a partition in flight at a time whatever max_in_flight, so a retry never
        reorders a partition while other partitions share the connection's 5 requests
        (pyprod.aio without idempotence, as aiokafka). Before start(); with idempotence, no
        muting: sequence numbers keep the order."""
        assert not self.is_alive(), "keep_partition_order() before the Sender starts"
        if self.txn_partitions is None:
            self.guarantee_order = self.produce_loop.guarantee_order = True

    def set_transactions(self, transaction_manager):
        """A transactional producer: each loop runs its TransactionManager's step first."""
        self.transaction_manager = transaction_manager

    def run(self):
        """The thread: kcore's SenderLoop.run, until initiate_close() and its closing drain."""
        self.produce_loop.run(self)

    def initiate_close(self):
        self.accumulator.close()
        self.produce_loop.running = False
        self.wakeup()

    def force_close(self):
        self.produce_loop.forced = True
        self.initiate_close()

    def wakeup(self):
        self.produce_loop.net.wakeup()

    # -- one loop ---------------------------------------------------------------------------
    def run_once(self):
        """One loop of kcore's SenderLoop (errors raised: no catch-all)."""
        self.produce_loop.step(self)

    def decide(self, now):
        """The producer id's decisions, which come before anything is sent under it."""
        txn_partitions = self.txn_partitions
        if txn_partitions.fatal_error is not None:
            if self.accumulator.has_undrained():  # appended by a send() that raced the error
                self.accumulator.abort_incomplete(txn_partitions.fatal_error, close=False)
            self._poll(self._next_deadline_delay(now))
            return
        if self.transaction_manager is not None:  # its producer id and resets: its requests
            self._poll(min(self.retry_backoff_ms, self._next_deadline_delay(now)))
            return
        if txn_partitions.needs_producer_id():
            if txn_partitions.bump_epoch():
                log.info("Producer id %d: epoch bumped to %d", txn_partitions.producer_id,
                         txn_partitions.producer_epoch)
                self._poll(self._send_producer_data(now))
                return
            self._maybe_init_producer_id(now)
        elif txn_partitions.reset_pending:  # batches of unknown fate: asked about under the old id
            self._poll(self._send_producer_data(now))
            return
        # Nothing is sent without a producer id; responses and expiry still run.
        wait = max(self._init_pid_not_before - now, self.retry_backoff_ms, 1)
        self._poll(min(wait, self._next_deadline_delay(now)))

    def _poll(self, timeout):
        self.produce_loop.net.poll(timeout)

    def _next_deadline_delay(self, now):
        return self.produce_loop.next_deadline_delay(now)

    def _send_producer_data(self, now):
        return self.produce_loop.send_producer_data(self.client, self.metadata,
                                                    self.max_request_size, now)

    # -- produce (the requests: kcore's SenderLoop) ---------------------------------------
    def _on_error(self, batch, error):
        """The SenderLoop's hook: the batch's request failed, or left it out."""
        self._retry_or_fail(batch, error, now_ms())

    def _on_partition(self, batch, result):
        """The SenderLoop's hook: the response gave the batch's partition an error code."""
        self._handle_partition(batch, result, now_ms())

    def _handle_partition(self, batch, result, now):
        """result: (topic, partition, error_code, base_offset, log_append_time_ms,
        log_start_offset, error_message, record_errors), from kcore.decode_produce_response;
        error_code is not 0."""
        error_class = errors.for_code(result[2])
        if error_class is errors.DuplicateSequenceNumberError:
            self.produce_loop.succeed(batch, -1, -1)  # written by an earlier attempt (Java)
            return
        if error_class is errors.MessageSizeTooLargeError and batch.record_count > 1:
            self._split(batch, now)
            return
        message, record_errors = result[6], result[7]
        error = error_class(message or "")
        if record_errors:
            self._fail(batch, error, {index: errors.InvalidRecordError(text or "")
                                      for index, text in record_errors})
            return
        txn_partitions = self.txn_partitions
        if self.transaction_manager is not None and error_class in (
                errors.OutOfOrderSequenceNumberError, errors.UnknownProducerIdError,
                errors.InvalidProducerIdMappingError):
            txn_partitions.request_reset()  # the transaction aborts; a new epoch follows (KIP-360)
            self._fail(batch, error)
            return
        if txn_partitions is not None:
            if error_class is errors.OutOfOrderSequenceNumberError:
                if txn_partitions.retry_out_of_order(batch):
                    self._retry_or_fail(batch, error, now, force_retriable=True)
                else:  # a gap the broker saw first: surfaced, and the producer id is reset
                    log.error("%s: the broker returned OUT_OF_ORDER_SEQUENCE_NUMBER for "
                              "producer id %d, sequence %d; resetting the producer id",
                              batch.topic_partition, txn_partitions.producer_id,
                              batch.base_sequence)
                    self._fail(batch, error)
                return
            if error_class is errors.UnknownProducerIdError:
                txn_partitions.request_reset()  # the broker lost this producer's state: new id
                txn_partitions.not_written(batch)
                self._retry_or_fail(batch, error, now, force_retriable=True)
                return
        self._retry_or_fail(batch, error, now)

    def _retry_or_fail(self, batch, error, now, force_retriable=False):
        log.debug("%s failed (attempt %d, seq %d): %r", batch.topic_partition, batch.attempts,
                  batch.base_sequence, error)
        if getattr(error, "invalid_metadata", False):
            self.metadata.request_update()
        retriable = force_retriable or getattr(error, "retriable", False)
        if retriable and batch.attempts < self.retries and \
                now - batch.created_ms < self.delivery_timeout_ms:
            self._count("record-retry-total", batch)
            self._unmute(batch)
            if self.txn_partitions is not None:
                self.txn_partitions.remove(batch)
            self.accumulator.reenqueue(batch, now)
            if self.txn_partitions is not None:
                self.txn_partitions.waiting(batch)
            # a retried batch waits in its queue now: expire it there on time
            self.produce_loop.schedule_queue_scan(now, batch.created_ms +
                                                  self.delivery_timeout_ms)
            return
        self._fail(batch, error)

    def _split(self, batch, now):
        """MESSAGE_TOO_LARGE for 2+ records: send its halves instead (Java's split), with its
        sequences; it completes when they have (_piece_done)."""
        self.metrics["batch-split-total"] += 1
        refused = batch.estimated_size()  # as sent (compressed, if it was)
        bound = self.accumulator.lower_batch_max_size(refused)
        if bound is not None:
            log.info("A batch of %d bytes for %s was too large for the broker: batches now "
                     "grow to %d bytes at most (batch_max_size)", refused,
                     batch.topic_partition, bound)
        self._unmute(batch)
        if self.txn_partitions is not None:
            self.txn_partitions.remove(batch)
        for half in self.accumulator.split_and_reenqueue(batch):
            self._split_parents[half] = batch
            if self.txn_partitions is not None:
                self.txn_partitions.waiting(half)
        self.produce_loop.schedule_queue_scan(now, batch.created_ms + self.delivery_timeout_ms)

    def _piece_done(self, batch):
        parent = self._split_parents.pop(batch, None)
        if parent is None:
            return
        pieces = parent.result.pieces
        if all(piece.is_done for _, _, piece in pieces):
            self.accumulator.complete(parent, record_errors=piece_errors(pieces) or None)
            self._piece_done(parent)

    def _fail(self, batch, error, record_errors=None):
        self._unmute(batch)
        if self.txn_partitions is not None:
            self.txn_partitions.failed(batch)
        self._count("record-error-total", batch)
        self.accumulator.complete(batch, error=error, record_errors=record_errors)
        if self._split_parents:
            self._piece_done(batch)
        if self.transaction_manager is not None:
            self.transaction_manager.batch_failed(error)

    def abort_batch(self, batch, error):
        """A batch of an aborted transaction, taken off its queue: failed, nothing sent."""
        if self.txn_partitions is not None:
            self.txn_partitions.failed(batch)
        self._count("record-error-total", batch)
        self.accumulator.complete(batch, error=error)

    def _count(self, name, batch):
        """A records counter of self.metrics, in all and per topic (producer_metrics reads it)."""
        self.metrics[name] += batch.record_count
        self.metrics[name, batch.topic_partition.topic] += batch.record_count

    def _unmute(self, batch):
        if self.guarantee_order:
            self.accumulator.unmute(batch.topic_partition)

    # -- idempotence ------------------------------------------------------------------------
    def _maybe_init_producer_id(self, now):
        if self._init_pid_in_flight or now < self._init_pid_not_before:
            return
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            return
        try:
            version = self.client.api_version(node, init_producer_id.API_KEY)
        except errors.KafkaError as e:  # IncompatibleBrokerVersion: idempotence cannot work
            self.txn_partitions.fatal_error = e
            self.accumulator.abort_incomplete(e, close=False)
            return
        body = init_producer_id.encode_request(  # no transactional id: always a new producer id
            version, transactional_id=None, transaction_timeout_ms=self.transaction_timeout_ms)
        self._init_pid_in_flight = True
        self.client.send(node, init_producer_id.API_KEY, version, body,
                         callback=lambda r: self._handle_init_producer_id(version, r),
                         timeout_ms=self.request_timeout_ms)

    def _handle_init_producer_id(self, version, response):
        self._init_pid_in_flight = False
        if response.error is not None:
            self._init_pid_not_before = now_ms() + self.retry_backoff_ms
            return
        try:
            decoded = init_producer_id.decode_response(version, response.body, strict=False)
        except errors.KafkaError as e:
            log.warning("Bad InitProducerId response: %r", e)
            self._init_pid_not_before = now_ms() + self.retry_backoff_ms
            return
        if decoded.error_code != 0:
            error = errors.for_code(decoded.error_code)
            if getattr(error, "invalid_metadata", False) or error.retriable:
                self.metadata.request_update()
                self._init_pid_not_before = now_ms() + self.retry_backoff_ms
                return
            self.txn_partitions.fatal_error = error(_init_pid_refused(error))
            self.accumulator.abort_incomplete(self.txn_partitions.fatal_error, close=False)
            return
        log.info("Producer id %d, epoch %d", decoded.producer_id, decoded.producer_epoch)
        self.txn_partitions.set_producer_id(decoded.producer_id, decoded.producer_epoch)
