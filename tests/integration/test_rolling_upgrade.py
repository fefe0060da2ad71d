"""A rolling upgrade under load (issue 43, part 3): three Apache Kafka 3.9 nodes (KRaft) rolled
one by one to 4.4 while pyprod produces with idempotence (acks=all) and inside transactions,
then the finalized features raised to 4.4's (transaction.version 2). 0 lost, 0 duplicated,
order kept per key, no transaction left open; a producer started after the feature upgrade
runs transactions v2. Read back by kafka-python (read_committed for the transactions)."""
import threading
import time
import uuid

from kafka.admin import KafkaAdminClient

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_kafka_python
from tests.harness.waits import wait_until
from tests.harness.rolling_cluster import RollingKafkaCluster

FROM, TO, RELEASE = "3.9.2", "4.4.0", "4.4"
WAIT = 120  # s: bounds on waits, never timing assertions
KEYS = 12


class _Load(threading.Thread):
    """A loop of ``step()`` until stopped; the first exception it raised ends it (kept)."""

    def __init__(self, step):
        super().__init__(daemon=True)
        self.step, self.stop, self.error, self.steps = step, threading.Event(), None, 0

    def run(self):
        try:
            while not self.stop.is_set():
                self.step()
                self.steps += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def finish(self):
        self.stop.set()
        self.join(WAIT)
        assert not self.is_alive(), "the load thread did not stop"
        if self.error is not None:
            raise self.error


def _idempotent_load(producer, topic, futures):
    n = [0]

    def step():
        for _ in range(50):
            i = n[0]
            n[0] += 1
            futures.append((b"i%07d" % i, producer.send(topic, b"i%07d" % i,
                                                         key=b"k%d" % (i % KEYS))))
        time.sleep(0.02)
    return step


def _transactional_load(producer, topic, committed, aborted):
    n = [0]

    def step():
        values = [b"t%07d" % (n[0] + i) for i in range(20)]
        n[0] += len(values)
        try:
            producer.begin_transaction()
            for i, v in enumerate(values):
                producer.send(topic, v, key=b"k%d" % (i % KEYS))
            producer.commit_transaction()
            committed.extend(values)
        except errors.ProducerFencedError:
            raise
        except errors.KafkaError:  # Java's pattern: abort, and go on with the next; after a
            producer.abort_transaction()  # fatal error abort_transaction() raises it again
            aborted.extend(values)
        time.sleep(0.02)
    return step


def _in_key_order(records):
    by_key = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r.value)
    return all(v == sorted(v) for v in by_key.values())


def test_rolling_upgrade_3_9_to_4_4_under_load():
    cluster = RollingKafkaCluster(3, FROM)
    cluster.start(timeout=180)
    try:
        idem_topic = cluster.create_topic("roll-idem", 6, replication_factor=3)
        txn_topic = cluster.create_topic("roll-txn", 6, replication_factor=3)
        txn_id = "roll-" + uuid.uuid4().hex
        futures, committed, aborted = [], [], []
        with KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                           linger_ms=5) as idem, \
                KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                              transactional_id=txn_id, linger_ms=5) as txn:
            txn.init_transactions()
            loads = [_Load(_idempotent_load(idem, idem_topic, futures)),
                     _Load(_transactional_load(txn, txn_topic, committed, aborted))]
            for load in loads:
                load.start()
            for i in range(cluster.nodes):
                before = [load.steps for load in loads]
                cluster.upgrade_node(i, TO)
                wait_until(lambda: all(load.steps > b + 5 or load.error
                                   for load, b in zip(loads, before)),
                       "the producers go on after node %d rolled" % i, WAIT)
            cluster.upgrade_features(RELEASE)
            before = [load.steps for load in loads]
            wait_until(lambda: all(load.steps > b + 5 or load.error
                               for load, b in zip(loads, before)),
                   "the producers go on after the feature upgrade", WAIT)
            for load in loads:
                load.finish()
            idem.flush(WAIT)
        assert cluster.node_versions == [TO] * 3
        failed = [(v, f.exception) for v, f in futures if not f.succeeded()]
        assert failed == []
        assert len(committed) > 0

        # a producer started after the upgrade: transactions v2
        with KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                           transactional_id=txn_id) as txn:
            txn.init_transactions()
            assert txn.transaction_manager.client.transaction_version() >= 2
            txn.begin_transaction()
            last = [b"t9999999"]
            txn.send(txn_topic, last[0], key=b"k0")
            txn.commit_transaction()
            committed.extend(last)

        got = read_all_kafka_python(cluster.bootstrap_servers, idem_topic,
                                    expected_count=len(futures), timeout=WAIT)
        values = [r.value for r in got]
        assert len(values) == len(set(values)) == len(futures)  # 0 lost, 0 duplicated
        assert set(values) == {v for v, _ in futures}
        assert _in_key_order(got)

        got = read_all_kafka_python(cluster.bootstrap_servers, txn_topic,
                                    expected_count=len(committed), timeout=WAIT,
                                    isolation_level="read_committed")
        assert sorted(r.value for r in got) == sorted(committed)
        assert not {r.value for r in got} & set(aborted)
        assert _in_key_order([r for r in got if r.value != b"t9999999"])
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            state = admin.describe_transactions([txn_id])[txn_id].state
        finally:
            admin.close()
        print("rolling upgrade: %d idempotent records, %d committed, %d aborted in "
              "transactions" % (len(futures), len(committed), len(aborted)))
        assert "ONGOING" not in str(state).upper() and "PREPARE" not in str(state).upper()
    finally:
        cluster.stop(kill=True)
