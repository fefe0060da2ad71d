"""Transactional error codes injected by librdkafka's mock cluster (transactions v1): what retries
(coordinator moves, CONCURRENT_TRANSACTIONS, load in progress, lost answers), what is abortable
(the user aborts and goes on) and what is fatal (only close), each within max_block_ms."""
import uuid

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.mock_cluster import ApiKey

COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
TOPIC_AUTHORIZATION_FAILED, INVALID_PRODUCER_EPOCH = 29, 47
CONCURRENT_TRANSACTIONS, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 51, 53
PRODUCER_FENCED = 90
ADD_OFFSETS, TXN_OFFSET_COMMIT = 25, 28
RETRIED = [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
           CONCURRENT_TRANSACTIONS]


@pytest.fixture
def txn(mock_cluster):
    mock_cluster.topic_create("t", 3, 1)

    def make(**config):
        p = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers,
                          transactional_id="mock-" + uuid.uuid4().hex, max_block_ms=20000,
                          request_timeout_ms=3000, **config)
        return p
    return make


def _one(p, value=b"v", commit=True):
    p.begin_transaction()
    f = p.send("t", value)
    (p.commit_transaction if commit else p.abort_transaction)()
    return f


@pytest.mark.parametrize("api", [ApiKey.InitProducerId, ApiKey.AddPartitionsToTxn,
                                 ApiKey.EndTxn, ApiKey.FindCoordinator])
def test_retriable_codes_are_retried(mock_cluster, txn, api):
    mock_cluster.push_request_errors(api, RETRIED)
    with txn() as p:
        p.init_transactions()
        assert _one(p).get(10).partition in (0, 1, 2)
        assert _one(p).get(10).offset >= 0


def test_offsets_codes_are_retried(mock_cluster, txn):
    mock_cluster.push_request_errors(ADD_OFFSETS, [NOT_COORDINATOR, CONCURRENT_TRANSACTIONS])
    mock_cluster.push_request_errors(TXN_OFFSET_COMMIT, [COORDINATOR_LOAD_IN_PROGRESS])
    with txn() as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"v")
        p.send_offsets_to_transaction({("t", 0): 5}, "group-1")
        p.commit_transaction()


def test_lost_answers_are_asked_again(mock_cluster, txn):
    with txn() as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("t", b"v").get(10)
        for broker in range(1, 4):  # the EndTxn answer comes after the request timeout
            mock_cluster.broker_push_request_error_rtts(broker, ApiKey.EndTxn, [(0, 5000)])
        p.commit_transaction()
        _one(p)


def test_abortable_error_then_abort_and_go_on(mock_cluster, txn):
    with txn() as p:
        p.init_transactions()
        mock_cluster.push_request_errors(ApiKey.AddPartitionsToTxn, [TOPIC_AUTHORIZATION_FAILED])
        p.begin_transaction()
        f = p.send("t", b"refused")
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.commit_transaction()
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.send("t", b"more")  # until aborted
        p.abort_transaction()
        with pytest.raises(errors.KafkaError):
            f.get(5)  # the batch never went
        assert _one(p, b"after").get(10).offset >= 0


@pytest.mark.parametrize("api,code,error", [
    (ApiKey.EndTxn, PRODUCER_FENCED, errors.ProducerFencedError),
    (ApiKey.EndTxn, INVALID_PRODUCER_EPOCH, errors.ProducerFencedError),
    (ApiKey.AddPartitionsToTxn, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
     errors.TransactionalIdAuthorizationFailedError),
])
def test_fatal_errors_leave_only_close(mock_cluster, txn, api, code, error):
    with txn() as p:
        p.init_transactions()
        mock_cluster.push_request_errors(api, [code])
        p.begin_transaction()
        p.send("t", b"v")
        with pytest.raises(error):
            p.commit_transaction()
        for call in (p.abort_transaction, p.begin_transaction, lambda: p.send("t", b"x")):
            with pytest.raises(error):
                call()


def test_close_gives_up_on_requests_that_cannot_finish(mock_cluster, txn):
    p = txn(delivery_timeout_ms=4000, linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"v").get(10)
    mock_cluster.push_request_errors(ApiKey.EndTxn, [CONCURRENT_TRANSACTIONS] * 100000)
    p.close()  # its abort retries until delivery_timeout_ms, then close() returns


def test_init_refused(mock_cluster, txn):
    mock_cluster.push_request_errors(ApiKey.InitProducerId,
                                     [TRANSACTIONAL_ID_AUTHORIZATION_FAILED])
    with txn() as p:
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            p.init_transactions()
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            p.init_transactions()
