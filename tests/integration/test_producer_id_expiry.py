"""Producers that outlive their broker-side state (issue 43, part 3), on real Apache Kafka with
the expiry settings made short: an idempotent producer idle past ``producer.id.expiration.ms``
resumes with nothing lost or doubled; a transactional one idle past
``transactional.id.expiration.ms`` gets InvalidProducerIdMappingError, aborts (no EndTxn: the
coordinator forgot the id, as Java skips it) and goes on; a transaction past
``transaction.timeout.ms`` fails with InvalidProducerEpochError (KIP-588: abortable), and the
next one commits (under transactions v1 from a new producer: the abort is fenced, as in
Java). Read back by kafka-python (read_committed for the transactions)."""
import time
import uuid

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError

from pyprod import KafkaProducer, errors
from tests.harness.kafka_cluster import KafkaCluster
from tests.harness.readback import read_all_kafka_python
from tests.harness.waits import wait_until

WAIT = 60  # s: a bound on each wait for the broker to expire state, never a timing assertion


@pytest.fixture(scope="module")
def expiring():
    cluster = KafkaCluster(1, broker_props={
        "producer.id.expiration.ms": 2000, "producer.id.expiration.check.interval.ms": 500,
        "transactional.id.expiration.ms": 3000,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 500,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    cluster.start()
    yield cluster
    cluster.stop(kill=True)


def _admin(cluster):
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)


def _producers_on(admin, topic, partitions):
    found = admin.describe_producers([TopicPartition(topic, p) for p in range(partitions)])
    return sum(len(state.active_producers) for state in found.values())


def test_idempotent_producer_resumes_after_its_id_expired(expiring, topic):
    name = topic(2, cluster=expiring)
    admin = _admin(expiring)
    try:
        with KafkaProducer(bootstrap_servers=expiring.bootstrap_servers, linger_ms=0) as p:
            first = [p.send(name, b"a%03d" % i, key=b"%d" % (i % 5)) for i in range(200)]
            p.flush(WAIT)
            assert all(f.succeeded() for f in first)
            assert _producers_on(admin, name, 2) > 0
            wait_until(lambda: _producers_on(admin, name, 2) == 0, "expire the producer id",
                       WAIT)
            second = [p.send(name, b"b%03d" % i, key=b"%d" % (i % 5)) for i in range(200)]
            p.flush(WAIT)
            assert [f.exception for f in second if not f.succeeded()] == []
    finally:
        admin.close()
    got = read_all_kafka_python(expiring.bootstrap_servers, name, expected_count=400)
    values = [r.value for r in got]
    assert len(values) == 400 and len(set(values)) == 400
    by_key = {}
    for r in got:
        by_key.setdefault(r.key, []).append(r.value)
    for key, vals in by_key.items():  # each key's records in send order
        assert vals == sorted(vals), key


def _txn_known(admin, txn_id):
    try:
        admin.describe_transactions([txn_id])
    except TransactionalIdNotFoundError:
        return False
    return True


def test_transactional_id_expired_then_abort_and_go_on(expiring, topic):
    name = topic(2, cluster=expiring)
    txn_id = "expiring-" + uuid.uuid4().hex
    admin = _admin(expiring)
    try:
        with KafkaProducer(bootstrap_servers=expiring.bootstrap_servers,
                           transactional_id=txn_id, max_block_ms=20000) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(name, b"kept-0", key=b"k")
            p.commit_transaction()
            wait_until(lambda: not _txn_known(admin, txn_id), "expire the transactional id",
                       WAIT)
            p.begin_transaction()
            with pytest.raises(errors.InvalidProducerIdMappingError):
                p.send(name, b"lost", key=b"k").get(WAIT)
                p.commit_transaction()
            p.abort_transaction()  # no EndTxn the coordinator would refuse: a new producer id
            p.begin_transaction()
            p.send(name, b"kept-1", key=b"k")
            p.commit_transaction()
    finally:
        admin.close()
    got = read_all_kafka_python(expiring.bootstrap_servers, name, expected_count=2,
                                isolation_level="read_committed")
    assert [r.value for r in got] == [b"kept-0", b"kept-1"]


def test_timed_out_transaction_fails_typed_then_the_next_commits(kafka_txn, topic):
    """Java's way: the coordinator aborts the transaction and bumps the epoch, so the next
    send fails InvalidProducerEpochError (abortable, KIP-588). Under transactions v2 the abort
    then goes on (its EndTxn carries the new epoch); under v1 the coordinator answers the
    abort's EndTxn PRODUCER_FENCED, fatal as in Java: a new producer takes over the id."""
    name = topic(1, cluster=kafka_txn)
    txn_id = "timeout-" + uuid.uuid4().hex
    with KafkaProducer(bootstrap_servers=kafka_txn.bootstrap_servers, transactional_id=txn_id,
                       transaction_timeout_ms=1000) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"late").get(WAIT)
        time.sleep(3)  # past the timeout: the coordinator aborts it (cleanup every 500 ms)
        with pytest.raises(errors.InvalidProducerEpochError):
            p.send(name, b"later").get(WAIT)
            p.commit_transaction()
        if kafka_txn.transaction_version >= 2:
            p.abort_transaction()
            p.begin_transaction()
            p.send(name, b"next")
            p.commit_transaction()
        else:
            with pytest.raises(errors.ProducerFencedError):
                p.abort_transaction()
    if kafka_txn.transaction_version < 2:
        with KafkaProducer(bootstrap_servers=kafka_txn.bootstrap_servers,
                           transactional_id=txn_id) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(name, b"next")
            p.commit_transaction()
    got = read_all_kafka_python(kafka_txn.bootstrap_servers, name, expected_count=1,
                                isolation_level="read_committed")
    assert [r.value for r in got] == [b"next"]
