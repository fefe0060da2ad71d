"""TransactionManager: a transactional producer's state machine and requests (the transactional
half of Java's producer.internals.TransactionManager; kcore.TxnPartitionMap is the other
half: the sequences, and the gate that lets drain() take only partitions in the transaction).

User threads change the state (init, begin, send offsets, commit, abort) and queue requests;
the Sender thread sends them one at a time (``run``: kcore's SenderLoop calls it before each
produce step), adds the partitions that have batches to the open transaction, and reads the
answers (txn_request_handlers). Two protocols (KIP-890): v1 adds each partition with
AddPartitionsToTxn before its first batch; v2 (the brokers' finalized ``transaction.version``
>= 2, chosen at begin_transaction, so only between transactions) lets Produce v12 add it and
bumps the epoch at each EndTxn (v5). The state and the queue are under ``_lock``.
"""
import collections
import logging
import threading

import kcore
from pyprod import errors
from pyprod.txn_request_handlers import (
    GROUP, TRANSACTION, AddOffsetsToTxnHandler, AddPartitionsToTxnHandler,
    DescribeTransactionsHandler, EndTxnHandler, FindCoordinatorHandler, InitProducerIdHandler,
    TxnOffsetCommitHandler)

log = logging.getLogger(__name__)

UNINITIALIZED, INITIALIZING, READY = "UNINITIALIZED", "INITIALIZING", "READY"
IN_TRANSACTION, COMMITTING, ABORTING = "IN_TRANSACTION", "COMMITTING_TRANSACTION", \
    "ABORTING_TRANSACTION"
ABORTABLE_ERROR, FATAL_ERROR = "ABORTABLE_ERROR", "FATAL_ERROR"
PREPARED = "PREPARED_TRANSACTION"  # flushed and handed to another process to finish

_FROM = {  # target state -> the states it may be entered from (Java's isTransitionValid)
    INITIALIZING: {UNINITIALIZED, ABORTING},
    READY: {INITIALIZING, COMMITTING, ABORTING},
    IN_TRANSACTION: {READY, UNINITIALIZED},  # UNINITIALIZED: resume_transaction()
    PREPARED: {IN_TRANSACTION},
    COMMITTING: {IN_TRANSACTION},
    ABORTING: {IN_TRANSACTION, ABORTABLE_ERROR},
    ABORTABLE_ERROR: {IN_TRANSACTION, COMMITTING, ABORTABLE_ERROR, INITIALIZING},
}
_V1_CAPS = {"EndTxn": 4, "TxnOffsetCommit": 4}  # v5 of both is transactions v2


PreparedTransaction = collections.namedtuple(
    "PreparedTransaction", "transactional_id producer_id producer_epoch transaction_version")
PreparedTransaction.__doc__ = """What finishes a flushed, open transaction from another producer
(resume_transaction): the coordinator checks only the transactional id, producer id and epoch
(as Flink's KafkaSink resumes one). transaction_version: 1 or 2 (KIP-890)."""


class TransactionalRequestResult:
    """What a user call waits for: done(error=None) once, from the Sender thread. Awaitable on
    an asyncio loop without blocking it (through a kcore.Future made by the first await)."""

    def __init__(self, operation):
        self.operation = operation
        self.error = None
        self.value = None  # what the answer gave, for requests that return something
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._future = None  # kcore.Future, for awaits

    @property
    def is_done(self):
        return self._event.is_set()

    @property
    def failed(self):
        return self._event.is_set() and self.error is not None

    def done(self, error=None):
        with self._lock:
            if self._event.is_set():
                return
            self.error = error
            self._event.set()
            future = self._future
        if future is not None:
            _settle(future, error)

    def __await__(self):
        """Wait on the running asyncio loop; raises the error if it failed."""
        with self._lock:
            if self._future is None:
                self._future = kcore.Future()
                if self._event.is_set():
                    _settle(self._future, self.error)
        return self._future.__await__()

    def wait(self, timeout=None):
        """True once done (raising its error if it failed), False after timeout seconds."""
        if not self._event.wait(timeout):
            return False
        if self.error is not None:
            raise self.error
        return True


def _settle(future, error):
    if error is None:
        future.success(None)
    else:
        future.failure(error)


def _group(group_metadata):
    """(group_id, generation_id, member_id, group_instance_id) from a group id or from a
    consumer's group metadata (KIP-447: kafka-python's ConsumerGroupMetadata)."""
    if isinstance(group_metadata, str):
        return group_metadata, -1, "", None
    group_id = getattr(group_metadata, "group_id", None)
    if not isinstance(group_id, str) or not group_id:
        raise TypeError("group_metadata must be a consumer group id (str) or a consumer's "
                        "group_metadata(), got %r" % (group_metadata,))
    return (group_id, getattr(group_metadata, "generation_id", -1),
            getattr(group_metadata, "member_id", "") or "",
            getattr(group_metadata, "group_instance_id", None))


def _offsets(offsets):
    """{(topic, partition): (offset, metadata, leader_epoch)} from {TopicPartition:
    OffsetAndMetadata or int}."""
    out = {}
    for tp, value in dict(offsets).items():
        topic, partition = tp
        if isinstance(value, int):
            value = (value,)
        value = tuple(value)  # (offset,), 2.x's (offset, metadata) or 3.x's with an epoch
        offset, metadata, epoch = value + ("", -1)[len(value) - 1:] if value else (None,) * 3
        if not isinstance(offset, int) or offset < 0:
            raise ValueError("offset for %s:%s must be an int >= 0, got %r"
                             % (topic, partition, offset))
        out[(topic, partition)] = (offset, metadata, -1 if epoch is None else epoch)
    return out


class TransactionManager:
    def __init__(self, transactional_id, transaction_timeout_ms, txn_partitions, accumulator,
                 client, metadata, *, retry_backoff_ms, request_timeout_ms, batches_sent):
        """txn_partitions: the kcore.TxnPartitionMap (transactional=True) of the same producer;
        batches_sent: () -> how many batches the Sender has put in ProduceRequests."""
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.txn_partitions = txn_partitions
        self.accumulator = accumulator
        self.client = client
        self.metadata = metadata
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._batches_sent = batches_sent
        self._lock = threading.RLock()
        self.state = UNINITIALIZED
        self.last_error = None
        self._forgotten = False  # aborting a transaction whose id the coordinator forgot
        self._pending = []           # handlers waiting to be sent
        self._in_flight = None       # the handler whose request is out
        self._coordinators = {}      # (kind, key) -> node id
        self._adding = frozenset()   # partitions in the AddPartitionsToTxn in flight
        self._started = False        # EndTxn is needed: something joined the transaction
        self._v2 = False             # the open transaction's protocol
        self._applied = False        # the Sender applied the open transaction's gate
        self._sent_at_begin = 0
        self._flushing = False
        self._end_result = None
        self._refuse()

    # -- user threads ---------------------------------------------------------------------
    def initialize_transactions(self):
        with self._lock:
            self._raise_if_fatal()
            self._transition(INITIALIZING)
            result = TransactionalRequestResult("InitProducerId")
            self._enqueue(InitProducerIdHandler(self, result))
            return result

    def begin_transaction(self):
        with self._lock:
            self._raise_if_error()
            self._transition(IN_TRANSACTION)
            self._v2 = self.client.transaction_version() >= 2
            self._started = self._applied = False

    def send_offsets_to_transaction(self, offsets, group_metadata):
        with self._lock:
            self._raise_if_error()
            if self.state != IN_TRANSACTION:
                raise errors.IllegalStateError(
                    "Cannot send offsets to transaction because the producer is not in an "
                    "active transaction (state %s)" % self.state)
            group, offsets = _group(group_metadata), _offsets(offsets)
            result = TransactionalRequestResult("SendOffsetsToTransaction")
            if self._v2:
                self._enqueue(TxnOffsetCommitHandler(self, result, group, offsets, None))
            else:
                self._enqueue(AddOffsetsToTxnHandler(self, result, group, offsets))
            return result

    def prepare(self):
        """The open transaction, flushed by the caller, to be finished elsewhere: this
        producer sends nothing more in it and close() leaves it open."""
        with self._lock:
            self._raise_if_error()
            if self.accumulator.has_incomplete() or self._pending or self._in_flight:
                raise errors.IllegalStateError("prepare: flush() first")
            self._transition(PREPARED)
            pid, epoch = self.producer_id_and_epoch()
            return PreparedTransaction(self.transactional_id, pid, epoch, 2 if self._v2 else 1)

    def resume(self, prepared):
        """Take over a PreparedTransaction of this transactional id, before
        initialize_transactions(): commit or abort it next."""
        with self._lock:
            if prepared.transactional_id != self.transactional_id:
                raise ValueError("resume_transaction: transactional_id %r is not this "
                                 "producer's (%r)" % (prepared.transactional_id,
                                                      self.transactional_id))
            self._transition(IN_TRANSACTION)
            self.txn_partitions.set_producer_id(prepared.producer_id, prepared.producer_epoch)
            self._v2 = prepared.transaction_version >= 2
            self._applied = False
            self._started = True

    def begin_commit(self):
        return self._begin_end(True)

    def begin_abort(self):
        return self._begin_end(False)

    def _begin_end(self, commit):
        with self._lock:
            self._raise_if_fatal()
            target = COMMITTING if commit else ABORTING
            if self.state == target:  # a retry after a timeout waits for the same answer
                return self._end_result
            if commit and self.state == ABORTABLE_ERROR:
                raise self.last_error
            # Java: a coordinator that no longer knows the id (it expired) takes no EndTxn;
            # the abort goes straight to InitProducerId
            self._forgotten = not commit and self.state == ABORTABLE_ERROR and \
                isinstance(self.last_error, errors.InvalidProducerIdMappingError)
            self._transition(target)
            self._end_result = TransactionalRequestResult(
                "EndTxn(%s)" % ("COMMIT" if commit else "ABORT"))
            self._enqueue(EndTxnHandler(self, self._end_result, commit,
                                        None if self._v2 else _V1_CAPS["EndTxn"]))
            return self._end_result

    def describe_transaction(self, transactional_id):
        """DescribeTransactions (KIP-664, Kafka 3.0+) of any transactional id, sent by the
        Sender to that id's coordinator; this producer's state and transaction are left alone.
        After wait(), the result's ``value`` is the id's describe_transactions
        TransactionState (state, producer id and epoch...), or None if its coordinator does
        not know it. A broker without the API fails the result (UnsupportedVersionError)."""
        with self._lock:
            self._raise_if_fatal()
            result = TransactionalRequestResult("DescribeTransactions")
            self._enqueue(DescribeTransactionsHandler(self, result, transactional_id))
        self.client.network_poll.wakeup()
        return result

    def has_pending(self):
        with self._lock:
            return bool(self._pending) or self._in_flight is not None

    def in_transaction(self):
        return self.state in (IN_TRANSACTION, ABORTABLE_ERROR)

    # -- states -----------------------------------------------------------------------------
    def _transition(self, target, error=None):
        if target != FATAL_ERROR and self.state not in _FROM[target]:
            raise errors.IllegalStateError(
                "TransactionalId %s: Invalid transition attempted from state %s to state %s"
                % (self.transactional_id, self.state, target))
        log.debug("TransactionalId %s: %s -> %s", self.transactional_id, self.state, target)
        self.state = target
        if error is not None:
            self.last_error = error
        self._refuse()

    def _refuse(self):
        """What send() raises in this state (kcore's SendPath reads it)."""
        state = self.state
        if state == IN_TRANSACTION:
            refusal = None
        elif state in (UNINITIALIZED, INITIALIZING):
            refusal = errors.IllegalStateError(
                "Cannot perform a 'send' before completing a call to init_transactions when "
                "transactions are enabled.")
        elif state in (ABORTABLE_ERROR, FATAL_ERROR):
            refusal = self.last_error
        else:
            refusal = errors.IllegalStateError("Cannot call send in state %s" % state)
        self.txn_partitions.send_refusal = refusal

    def _raise_if_fatal(self):
        if self.state == FATAL_ERROR:
            raise self.last_error

    def _raise_if_error(self):
        if self.state in (FATAL_ERROR, ABORTABLE_ERROR):
            raise self.last_error

    def _enqueue(self, handler):
        self._pending.append(handler)

    # -- what the handlers report (Sender thread) -------------------------------------------
    def retry(self, handler, backoff_ms=None):
        handler.not_before = self._now() + (self.retry_backoff_ms if backoff_ms is None
                                            else min(backoff_ms, self.retry_backoff_ms))
        with self._lock:
            self._pending.append(handler)

    def lookup_coordinator(self, kind, key):
        self._coordinators.pop((kind, key), None)

    def coordinator_found(self, kind, key, node_id):
        self._coordinators[(kind, key)] = node_id
        if self.metadata.cluster.broker_metadata(node_id) is None:
            self.metadata.request_update()

    def producer_id_and_epoch(self):
        return self.txn_partitions.producer_id, self.txn_partitions.producer_epoch

    def producer_id_set(self, handler, producer_id, producer_epoch):
        log.info("TransactionalId %s: producer id %d, epoch %d", self.transactional_id,
                 producer_id, producer_epoch)
        self.txn_partitions.set_producer_id(producer_id, producer_epoch)
        with self._lock:
            if self.state == INITIALIZING:
                self._transition(READY)
        if handler.result is not None:
            handler.result.done()

    def partitions_added(self, handler, partitions):
        self._adding = frozenset()
        self.txn_partitions.add_to_transaction(partitions)
        self._started = True

    def partitions_not_added(self, handler):
        self._adding = frozenset()  # looked for again at the next run

    def offsets_added(self, handler):
        self._started = True
        with self._lock:
            self._pending.append(TxnOffsetCommitHandler(
                self, handler.result, handler.group, handler.offsets, _V1_CAPS["TxnOffsetCommit"]))

    def offsets_committed(self, handler):
        self._started = True
        handler.result.done()

    def transaction_ended(self, handler, producer_id, producer_epoch):
        txn_partitions = self.txn_partitions
        txn_partitions.clear_transaction()
        self._started = self._applied = self._forgotten = False
        self._end_flush()
        if producer_id >= 0 and producer_epoch >= 0:  # v5: the next transaction's epoch
            txn_partitions.set_producer_id(producer_id, producer_epoch)
        elif txn_partitions.reset_pending:  # an aborted batch left a gap in its sequences
            with self._lock:
                self._transition(INITIALIZING)
                self._enqueue(InitProducerIdHandler(self, handler.result,
                                                    *self.producer_id_and_epoch()))
            return
        with self._lock:
            self._transition(READY)
        handler.result.done()

    def abortable(self, error, bump_epoch=False):
        if bump_epoch:
            self.txn_partitions.request_reset()
        with self._lock:
            if self.state == FATAL_ERROR:
                return
            if self.state not in _FROM[ABORTABLE_ERROR]:
                log.warning("TransactionalId %s: %r in state %s", self.transactional_id,
                            error, self.state)
                return
            log.warning("TransactionalId %s: abortable error %r", self.transactional_id, error)
            self._transition(ABORTABLE_ERROR, error)
            self._fail_pending(error, lambda h: h.needs_transaction or
                               (isinstance(h, EndTxnHandler) and h.commit))

    def fatal(self, error):
        log.error("TransactionalId %s: fatal error %r", self.transactional_id, error)
        with self._lock:
            self._transition(FATAL_ERROR, error)
            self.txn_partitions.fatal_error = error
            self._fail_pending(error, lambda h: True)
        self._end_flush()

    def _fail_pending(self, error, which):
        keep = []
        for handler in self._pending:
            (handler.fail(error) if which(handler) else keep.append(handler))
        self._pending[:] = keep
        if self.state in (ABORTABLE_ERROR, FATAL_ERROR):
            self._end_flush()

    def close(self, error):
        """The producer closed: what is still pending fails."""
        with self._lock:
            self._fail_pending(error, lambda h: True)
            if self._in_flight is not None:
                self._in_flight.fail(error)
        self._end_flush()

    def batch_failed(self, error):
        """A batch of the transaction failed: the transaction cannot commit (Java's
        handleFailedBatch); fencing and authorization are fatal."""
        if isinstance(error, errors.TransactionAbortedError):
            return
        if isinstance(error, (errors.ProducerFencedError,
                              errors.TransactionalIdAuthorizationFailedError,
                              errors.ClusterAuthorizationFailedError)):
            self.fatal(error)
        else:
            self.abortable(error)

    # -- the Sender thread's step -----------------------------------------------------------
    def run(self, sender, now):
        """Before each produce step: None (go on producing), or how long to poll first (a
        transactional request is out, or waits for its backoff or its node)."""
        if self._in_flight is not None:
            return self._wait(sender, now, self.request_timeout_ms)
        state = self.state
        if state in (ABORTING, ABORTABLE_ERROR):
            for batch in self.accumulator.take_undrained():
                sender.abort_batch(batch, self.last_error if state == ABORTABLE_ERROR else
                                   errors.TransactionAbortedError(
                                       "Failing batch since transaction was aborted"))
        if state in (IN_TRANSACTION, COMMITTING, ABORTING):
            self._apply(sender, state)
        with self._lock:
            handler = self._next(now)
        if handler is None:
            return None
        if handler.not_before > now:
            with self._lock:
                self._pending.append(handler)
            return self._wait(sender, now, handler.not_before - now)
        return self._send(sender, handler, now)

    def _apply(self, sender, state):
        txn_partitions = self.txn_partitions
        if not self._applied:
            self._applied = True
            self._sent_at_begin = self._batches_sent()
            self.client.use_transaction_v2(self._v2)
            txn_partitions.txn_all = self._v2
        if self._v2:
            if not self._started and self._batches_sent() != self._sent_at_begin:
                self._started = True
        elif not self._adding and state != ABORTING:
            new = [tp for tp in self.accumulator.undrained_partitions()
                   if not txn_partitions.in_transaction(tp)]
            if new:
                self._adding = frozenset(new)
                with self._lock:
                    self._pending.append(AddPartitionsToTxnHandler(self, new))
        if state == COMMITTING and not self._flushing:
            self._flushing = True
            self.accumulator.begin_flush()

    def _end_flush(self):
        if self._flushing:
            self._flushing = False
            self.accumulator.end_flush()

    def _next(self, now):
        """The next handler to send (lowest priority first, FIFO), with the GIL and _lock."""
        if not self._pending:
            return None
        handler = min(self._pending, key=lambda h: h.priority)
        if isinstance(handler, EndTxnHandler):
            if self.accumulator.has_incomplete() or self._adding:
                return None  # the transaction's batches go first (Java)
            if handler.commit and self.state == ABORTABLE_ERROR:
                self._pending.remove(handler)
                handler.fail(self.last_error)
                return None
            if not self._started or self._forgotten:  # nothing to end, or no one to tell
                self._pending.remove(handler)
                self.transaction_ended(handler, -1, -1)
                return None
        kind = handler.coordinator
        if kind is not None and (kind, handler.key) not in self._coordinators:
            if not any(isinstance(h, FindCoordinatorHandler) and h.key == handler.key
                       for h in self._pending):
                self._pending.append(FindCoordinatorHandler(self, kind, handler.key))
            return self._next(now) if handler.priority > 0 else None
        self._pending.remove(handler)
        return handler

    def _send(self, sender, handler, now):
        client = self.client
        if handler.coordinator is None:
            node = client.least_loaded_node(now)
        else:
            node = self._coordinators[(handler.coordinator, handler.key)]
        if node is None or not client.ready(node, now):
            if node is not None and handler.coordinator is not None and \
                    client.is_connection_failed(node):  # it may have moved: ask again
                self.lookup_coordinator(handler.coordinator, handler.key)
            with self._lock:
                self._pending.append(handler)
            delay = self.retry_backoff_ms if node is None else \
                min(max(client.connection_delay(node, now), 1), self.retry_backoff_ms)
            return self._wait(sender, now, delay)
        try:
            version = client.api_version(node, handler.api.API_KEY)
        except errors.KafkaError as e:
            handler.unsupported(e)
            return 0
        if handler.max_version is not None:
            version = min(version, handler.max_version)
        self._in_flight = handler
        client.send(node, handler.api.API_KEY, version, handler.body(version),
                    callback=lambda response: self._answered(handler, version, response),
                    timeout_ms=self.request_timeout_ms)
        return self._wait(sender, now, self.request_timeout_ms)

    def _answered(self, handler, version, response):
        self._in_flight = None
        if response.error is not None:  # disconnected or timed out: ask again
            log.debug("TransactionalId %s: %r failed: %r", self.transactional_id, handler,
                      response.error)
            if handler.coordinator is not None:
                self.lookup_coordinator(handler.coordinator, handler.key)
            self.retry(handler)
            return
        try:
            decoded = handler.api.decode_response(version, response.body, strict=False)
        except errors.KafkaError as e:
            log.warning("TransactionalId %s: bad %r answer: %r", self.transactional_id,
                        handler, e)
            self.retry(handler)
            return
        handler.on_answer(decoded)
        if self.state in (ABORTABLE_ERROR, FATAL_ERROR) and handler not in self._pending:
            handler.fail(self.last_error)  # its own answer made the error (done: no-op)

    @staticmethod
    def _wait(sender, now, delay):
        return max(0, min(delay, sender.produce_loop.next_deadline_delay(now)))

    def _now(self):
        return self.client.network_poll.now_ms()
