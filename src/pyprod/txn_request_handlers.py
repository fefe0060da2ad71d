"""The transactional requests and what their answers do (Java's TransactionManager inner
classes: FindCoordinatorHandler, InitProducerIdHandler, AddPartitionsToTxnHandler,
AddOffsetsToTxnHandler, TxnOffsetCommitHandler, EndTxnHandler), and DescribeTransactionsHandler
(KIP-664: another transactional id's state, which leaves this producer's alone).

Each handler says where its request goes (a coordinator, or the least loaded node), which API
versions it may use, its body, and what each error code means: retry (after the backoff),
look the coordinator up again and retry, an abortable error (the user aborts and goes on) or a
fatal one (only close() is left). Answers are read on the Sender thread;
``transaction_manager`` is the producer's pyprod.transaction_manager.TransactionManager.
"""
from pyprod import errors
from pyprod.protocol import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions,
                             end_txn, find_coordinator, init_producer_id, txn_offset_commit)

TRANSACTION, GROUP = find_coordinator.TRANSACTION, find_coordinator.GROUP

_LOOKUP = (errors.CoordinatorNotAvailableError, errors.NotCoordinatorError)
_RETRY = (errors.CoordinatorLoadInProgressError, errors.ConcurrentTransactionsError,
          errors.UnknownTopicOrPartitionError, errors.RequestTimedOutError)
_FENCED = (errors.ProducerFencedError, errors.InvalidProducerEpochError)
_FATAL = (errors.TransactionalIdAuthorizationFailedError, errors.InvalidTxnStateError,
          errors.ClusterAuthorizationFailedError, errors.UnsupportedVersionError,
          errors.UnsupportedForMessageFormatError, errors.TransactionCoordinatorFencedError)
_BUMP = (errors.UnknownProducerIdError, errors.InvalidProducerIdMappingError)
_ABORTABLE = (errors.TransactionAbortableError, errors.GroupAuthorizationFailedError,
              errors.TopicAuthorizationFailedError)
_COMMIT_FAILED = (errors.UnknownMemberIdError, errors.IllegalGenerationError,
                  errors.FencedInstanceIdError)
_CONCURRENT_BACKOFF_MS = 20  # Java retries CONCURRENT_TRANSACTIONS of a first add this soon


class TxnRequestHandler:
    api = None             # the protocol module
    priority = 3           # lower goes first (Java: coordinator, producer id, add, end)
    coordinator = TRANSACTION  # TRANSACTION, GROUP, or None: the least loaded node
    max_version = None     # a cap below the module's, or None
    needs_transaction = True  # failed with the error once the transaction cannot commit

    def __init__(self, transaction_manager, result=None):
        self.transaction_manager = transaction_manager
        self.result = result
        self.not_before = 0   # ms: a retry waits for its backoff

    @property
    def key(self):
        return self.transaction_manager.transactional_id

    def body(self, version):
        raise NotImplementedError

    def on_answer(self, response):
        """The decoded response: each error code's meaning."""
        raise NotImplementedError

    def on_error(self, error, what):
        """The usual meaning of a transactional error code (Java's per-handler cases)."""
        transaction_manager = self.transaction_manager
        if isinstance(error, _LOOKUP):
            transaction_manager.lookup_coordinator(self.coordinator, self.key)
            transaction_manager.retry(self)
        elif isinstance(error, errors.ConcurrentTransactionsError):
            transaction_manager.retry(self, _CONCURRENT_BACKOFF_MS)
        elif isinstance(error, _RETRY):
            transaction_manager.retry(self)
        elif isinstance(error, _FENCED):
            transaction_manager.fatal(errors.ProducerFencedError(
                "There is a newer producer with the same transactional_id %r, or the "
                "transaction was aborted by the coordinator (%s: %s)" % (
                    transaction_manager.transactional_id, what, type(error).__name__)))
        elif isinstance(error, _FATAL):
            transaction_manager.fatal(error)
        elif isinstance(error, _BUMP):
            transaction_manager.abortable(error, bump_epoch=True)
        elif isinstance(error, _COMMIT_FAILED):
            transaction_manager.abortable(errors.CommitFailedError(
                "%s: the consumer group member is no longer current (%s)" % (
                    what, type(error).__name__)))
        elif isinstance(error, _ABORTABLE):
            transaction_manager.abortable(error)
        else:
            transaction_manager.fatal(errors.KafkaError(
                "Unexpected error in %s response: %r" % (what, error)))

    def error_for(self, code, what, message=None):
        return errors.for_code(code)("%s: %s" % (what, message) if message else what)

    def fail(self, error):
        if self.result is not None:
            self.result.done(error)

    def unsupported(self, error):
        """The coordinator has no version of this API that pyprod speaks."""
        self.transaction_manager.fatal(error)

    def __repr__(self):
        return "<%s>" % type(self).__name__


class FindCoordinatorHandler(TxnRequestHandler):
    api = find_coordinator
    priority = 0
    coordinator = None
    needs_transaction = False

    def __init__(self, transaction_manager, kind, key):
        super().__init__(transaction_manager)
        self.kind, self._key = kind, key

    @property
    def key(self):
        return self._key

    def body(self, version):
        return find_coordinator.encode_request(version, self._key, self.kind)

    def min_version(self):
        return 1 if self.kind == TRANSACTION else 0

    def on_answer(self, response):
        found = find_coordinator.coordinator(response, self._key)
        if found.error_code == 0:
            self.transaction_manager.coordinator_found(self.kind, self._key, found.node_id)
            return
        error = self.error_for(found.error_code, "FindCoordinator", found.error_message)
        if isinstance(error, errors.GroupAuthorizationFailedError):
            self.transaction_manager.abortable(error)
        elif isinstance(error, _LOOKUP + _RETRY):
            self.transaction_manager.retry(self)
        else:
            self.on_error(error, "FindCoordinator")


class InitProducerIdHandler(TxnRequestHandler):
    """A producer id for the transactional id (fencing older producers of it), or, with the
    current id and epoch (v3+), the epoch bumped after an aborted transaction left a gap."""
    api = init_producer_id
    priority = 1
    needs_transaction = False

    def __init__(self, transaction_manager, result=None, producer_id=-1, producer_epoch=-1):
        super().__init__(transaction_manager, result)
        self.producer_id, self.producer_epoch = producer_id, producer_epoch

    def body(self, version):
        return init_producer_id.encode_request(
            version, transactional_id=self.transaction_manager.transactional_id,
            transaction_timeout_ms=self.transaction_manager.transaction_timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch)

    def on_answer(self, response):
        if response.error_code == 0:
            self.transaction_manager.producer_id_set(self, response.producer_id,
                                                     response.producer_epoch)
        else:
            self.on_error(self.error_for(response.error_code, "InitProducerId"),
                          "InitProducerId")


class AddPartitionsToTxnHandler(TxnRequestHandler):
    api = add_partitions_to_txn
    priority = 2

    def __init__(self, transaction_manager, partitions):
        super().__init__(transaction_manager)
        self.partitions = frozenset(partitions)

    def body(self, version):
        pid, epoch = self.transaction_manager.producer_id_and_epoch()
        return add_partitions_to_txn.encode_request(
            version, transactional_id=self.transaction_manager.transactional_id, producer_id=pid,
            producer_epoch=epoch, partitions=self.partitions)

    def on_answer(self, response):
        codes = add_partitions_to_txn.partition_errors(response)
        failed = {tp: code for tp, code in codes.items() if code != 0}
        if not failed:
            self.transaction_manager.partitions_added(self, self.partitions)
            return
        worst = None
        for tp, code in failed.items():
            error = self.error_for(code, "AddPartitionsToTxn %s" % (tp,))
            if isinstance(error, errors.OperationNotAttemptedError):
                continue  # another partition's error stopped it
            if isinstance(error, errors.TopicAuthorizationFailedError):
                error = errors.TopicAuthorizationFailedError(
                    sorted({t for (t, _), c in failed.items() if c == code}))
            worst = error
            if not isinstance(error, _LOOKUP + _RETRY):
                break
        self.transaction_manager.partitions_not_added(self)
        self.on_error(worst or errors.OperationNotAttemptedError(), "AddPartitionsToTxn")


class AddOffsetsToTxnHandler(TxnRequestHandler):
    """Transactions v1: the group's offsets partition joins the transaction; TxnOffsetCommit
    follows to the group coordinator."""
    api = add_offsets_to_txn
    priority = 2

    def __init__(self, transaction_manager, result, group, offsets):
        super().__init__(transaction_manager, result)
        self.group, self.offsets = group, offsets

    def body(self, version):
        pid, epoch = self.transaction_manager.producer_id_and_epoch()
        return add_offsets_to_txn.encode_request(
            version, transactional_id=self.transaction_manager.transactional_id, producer_id=pid,
            producer_epoch=epoch, group_id=self.group[0])

    def on_answer(self, response):
        if response.error_code == 0:
            self.transaction_manager.offsets_added(self)
        else:
            self.on_error(self.error_for(response.error_code, "AddOffsetsToTxn"),
                          "AddOffsetsToTxn")


class TxnOffsetCommitHandler(TxnRequestHandler):
    """The offsets, committed with the transaction (v5, transactions v2, without
    AddOffsetsToTxn first)."""
    api = txn_offset_commit
    priority = 2
    coordinator = GROUP

    def __init__(self, transaction_manager, result, group, offsets, max_version):
        super().__init__(transaction_manager, result)
        self.group, self.offsets, self.max_version = group, dict(offsets), max_version

    @property
    def key(self):
        return self.group[0]

    def body(self, version):
        pid, epoch = self.transaction_manager.producer_id_and_epoch()
        group_id, generation_id, member_id, instance_id = self.group
        return txn_offset_commit.encode_request(
            version, transactional_id=self.transaction_manager.transactional_id, group_id=group_id,
            producer_id=pid, producer_epoch=epoch, offsets=self.offsets,
            generation_id=generation_id, member_id=member_id, group_instance_id=instance_id)

    def on_answer(self, response):
        codes = txn_offset_commit.partition_errors(response)
        for tp, code in codes.items():
            if code == 0:
                self.offsets.pop(tp, None)
        failed = [code for code in codes.values() if code != 0]
        if not failed:
            self.transaction_manager.offsets_committed(self)
            return
        self.on_error(self.error_for(failed[0], "TxnOffsetCommit"), "TxnOffsetCommit")


class EndTxnHandler(TxnRequestHandler):
    """EndTxn(COMMIT or ABORT); under transactions v2 (v5) the answer carries the producer's
    next epoch. Sent once no batch of the transaction is incomplete."""
    api = end_txn
    priority = 3
    needs_transaction = False  # the commit checks the state itself (TransactionManager)

    def __init__(self, transaction_manager, result, commit, max_version):
        super().__init__(transaction_manager, result)
        self.commit, self.max_version = commit, max_version

    def body(self, version):
        pid, epoch = self.transaction_manager.producer_id_and_epoch()
        return end_txn.encode_request(
            version, transactional_id=self.transaction_manager.transactional_id, producer_id=pid,
            producer_epoch=epoch, committed=self.commit)

    def on_answer(self, response):
        what = "EndTxn(%s)" % ("COMMIT" if self.commit else "ABORT")
        if response.error_code == 0:
            self.transaction_manager.transaction_ended(self, response.producer_id,
                                                       response.producer_epoch)
        else:
            self.on_error(self.error_for(response.error_code, what), what)


class DescribeTransactionsHandler(TxnRequestHandler):
    """DescribeTransactions of ``transactional_id`` (any id: its own coordinator is looked up).
    The result's ``value``: its TransactionState, or None when the coordinator does not know
    it (TRANSACTIONAL_ID_NOT_FOUND). Other errors, and a broker without the API, fail the
    result only: this producer's state is never touched."""
    api = describe_transactions
    priority = 2
    needs_transaction = False

    def __init__(self, transaction_manager, result, transactional_id):
        super().__init__(transaction_manager, result)
        self._key = transactional_id

    @property
    def key(self):
        return self._key

    def body(self, version):
        return describe_transactions.encode_request(version, [self._key])

    def on_answer(self, response):
        try:
            state = describe_transactions.state_of(response, self._key)
        except KeyError as e:
            self.fail(errors.KafkaProtocolError("DescribeTransactions: %s" % (e,)))
            return
        if state.error_code == 0:
            self.result.value = state
            self.result.done()
            return
        error = self.error_for(state.error_code, "DescribeTransactions %r" % (self._key,))
        if isinstance(error, errors.TransactionalIdNotFoundError):
            self.result.done()  # value None: the coordinator does not know the id
        elif isinstance(error, _LOOKUP):
            self.transaction_manager.lookup_coordinator(self.coordinator, self._key)
            self.transaction_manager.retry(self)
        elif isinstance(error, _RETRY):
            self.transaction_manager.retry(self)
        else:
            self.fail(error)

    def unsupported(self, error):
        self.fail(error)
