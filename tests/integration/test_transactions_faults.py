"""Transactions when the transaction coordinator's broker dies (3-node Kafka): each transaction is
visible whole or not at all, commit_transaction() returns only once every record of it is
written (a commit that returns is never a silent loss), and nothing hangs past max_block_ms."""
import time
import uuid

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_kafka_python

PER_TXN = 200


def _coordinator(producer):
    """The node id of the producer's transaction coordinator (the test reads the manager)."""
    txn = producer.transaction_manager
    return txn._coordinators[(1, txn.transactional_id)]


def _finish(p):
    """Commit as a user would: a timeout is retried (the same commit goes on); an error that
    makes the commit impossible is answered by abort_transaction()."""
    for _ in range(3):
        started = time.monotonic()
        try:
            p.commit_transaction()
            return "committed"
        except errors.KafkaTimeoutError:
            assert time.monotonic() - started < 45  # max_block_ms bounds each wait
        except errors.KafkaError as e:
            p.abort_transaction()
            return repr(e)
    raise AssertionError("the commit never finished")


def test_coordinator_killed_mid_transaction(kafka3, topic):
    name = topic(3, cluster=kafka3, replication_factor=3)
    txn_id = "coord-" + uuid.uuid4().hex
    outcome = {}
    killed = None
    p = KafkaProducer(bootstrap_servers=kafka3.bootstrap_servers, transactional_id=txn_id,
                      max_block_ms=40000, request_timeout_ms=5000, delivery_timeout_ms=60000)
    try:
        p.init_transactions()
        for n in range(5):
            p.begin_transaction()
            for i in range(PER_TXN):
                p.send(name, b"%d-%d" % (n, i), key=b"%d" % i)
            if n == 2:
                killed = _coordinator(p)
                kafka3.kill_node(killed)
            outcome[n] = _finish(p)
    finally:
        p.close(timeout=30)
        if killed is not None:
            kafka3.start_node(killed)
    assert outcome[0] == outcome[1] == "committed"
    assert outcome[3] == outcome[4] == "committed", outcome  # it carries on without the node
    committed = sum(PER_TXN for v in outcome.values() if v == "committed")
    read = read_all_kafka_python(kafka3.bootstrap_servers, name, timeout=60,
                                 isolation_level="read_committed")
    seen = {}
    for r in read:
        seen.setdefault(int(r.value.split(b"-")[0]), []).append(r.value)
    for n, values in seen.items():  # whole or not at all
        assert sorted(values) == sorted(b"%d-%d" % (n, i) for i in range(PER_TXN)), n
    for n, how in outcome.items():  # a commit that returned is visible
        if how == "committed":
            assert n in seen, (n, outcome)
    assert len(read) >= committed
