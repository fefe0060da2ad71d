"""Transactions against real Apache Kafka, both protocols (kafka_txn: v1 and v2 of KIP-890), read
back by kafka-python and confluent-kafka with isolation_level=read_committed (and
read_uncommitted where the aborted records must show)."""
import threading
import time
import uuid

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_confluent, read_all_kafka_python


def _producer(cluster, txn_id=None, **config):
    return KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                         transactional_id=txn_id or "txn-" + uuid.uuid4().hex, **config)


def _values(cluster, topic, committed=True, reader=read_all_kafka_python, **kw):
    iso = "read_committed" if committed else "read_uncommitted"
    config = {"isolation_level": iso} if reader is read_all_kafka_python else \
        {"isolation.level": iso}
    return [(r.partition, r.value) for r in reader(cluster.bootstrap_servers, topic, **kw,
                                                   **config)]


def test_commit_and_abort_read_back_by_two_clients(kafka_txn, topic):
    name = topic(3, cluster=kafka_txn)
    with _producer(kafka_txn) as p:
        p.init_transactions()
        committed = []
        for n in range(3):
            p.begin_transaction()
            for i in range(300):
                value = b"t%d-%d" % (n, i)
                p.send(name, value, key=b"%d" % (i % 7))
                if n != 1:
                    committed.append(value)
            if n == 1:
                p.flush()  # written, then aborted (unflushed batches are dropped unsent)
                p.abort_transaction()
            else:
                p.commit_transaction()
    by_partition = {}
    for reader in (read_all_kafka_python, read_all_confluent):
        got = _values(kafka_txn, name, reader=reader, expected_count=len(committed))
        assert sorted(v for _, v in got) == sorted(committed)
        for part, v in got:  # per partition, in send order
            by_partition.setdefault((reader, part), []).append(v)
    for values in by_partition.values():  # (n, i) of t<n>-<i> grows within a partition
        assert values == sorted(values, key=lambda v: tuple(map(int, v[1:].split(b"-"))))
    everything = _values(kafka_txn, name, committed=False, expected_count=900)
    assert len(everything) == 900  # the aborted ones are in the log, marked aborted


def test_send_batch_and_threads_inside_a_transaction(kafka_txn, topic):
    name = topic(4, cluster=kafka_txn)
    with _producer(kafka_txn, linger_ms=5) as p:
        p.init_transactions()
        p.begin_transaction()
        futures = [p.send_batch(name, [b"b%d" % i for i in range(2000)])]

        def sender(t):
            futures.extend(p.send(name, b"s%d-%d" % (t, i)) for i in range(500))

        threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        p.commit_transaction()
        for f in futures:
            f.get(0)  # done, and succeeded
    got = _values(kafka_txn, name, expected_count=4000)
    assert sorted(v for _, v in got) == sorted(
        [b"b%d" % i for i in range(2000)] + [b"s%d-%d" % (t, i) for t in range(4)
                                             for i in range(500)])


def test_state_errors_are_kafka_pythons(kafka_txn, topic):
    name = topic(1, cluster=kafka_txn)
    with _producer(kafka_txn) as p:
        with pytest.raises(errors.IllegalStateError, match="init_transactions"):
            p.send(name, b"x")
        p.init_transactions()
        p.init_transactions()  # again: nothing to do
        with pytest.raises(errors.IllegalStateError, match="READY"):
            p.send(name, b"x")
        with pytest.raises(errors.IllegalStateError, match="Invalid transition"):
            p.commit_transaction()
        p.begin_transaction()
        with pytest.raises(errors.IllegalStateError, match="Invalid transition"):
            p.begin_transaction()
        p.abort_transaction()  # nothing sent: nothing to end on the broker
        p.begin_transaction()
        p.commit_transaction()
    with KafkaProducer(bootstrap_servers=kafka_txn.bootstrap_servers) as plain:
        with pytest.raises(errors.IllegalStateError, match="transactional_id"):
            plain.begin_transaction()


def test_fencing(kafka_txn, topic):
    name = topic(1, cluster=kafka_txn)
    txn_id = "fence-" + uuid.uuid4().hex
    first = _producer(kafka_txn, txn_id)
    first.init_transactions()
    first.begin_transaction()
    first.send(name, b"old-1").get(30)
    second = _producer(kafka_txn, txn_id)
    second.init_transactions()  # aborts the first's open transaction
    second.begin_transaction()
    second.send(name, b"new")
    second.commit_transaction()
    # Its batch fails with INVALID_PRODUCER_EPOCH (abortable, as Java and kafka-python); the
    # abort's EndTxn then learns it is fenced: fatal, every call raises ProducerFencedError.
    late = first.send(name, b"old-2")
    with pytest.raises((errors.InvalidProducerEpochError, errors.ProducerFencedError)):
        first.commit_transaction()
    with pytest.raises(errors.InvalidProducerEpochError):
        late.get(30)
    with pytest.raises(errors.ProducerFencedError):
        first.abort_transaction()
    for call in (lambda: first.send(name, b"old-3"), first.begin_transaction,
                 first.abort_transaction):
        with pytest.raises(errors.ProducerFencedError):
            call()
    first.close()
    second.close()
    assert _values(kafka_txn, name, expected_count=1) == [(0, b"new")]


def test_offsets_commit_with_the_transaction(kafka_txn, topic):
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    source, sink = topic(1, cluster=kafka_txn), topic(1, cluster=kafka_txn)
    group = "ctp-" + uuid.uuid4().hex
    with KafkaProducer(bootstrap_servers=kafka_txn.bootstrap_servers) as plain:
        for i in range(10):
            plain.send(source, b"in%d" % i)
    consumer = KafkaConsumer(source, bootstrap_servers=kafka_txn.bootstrap_servers,
                             group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    tp = TopicPartition(source, 0)
    try:
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 10 and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                records.extend(batch)
        assert len(records) == 10
        with _producer(kafka_txn) as p:
            p.init_transactions()
            for commit, upto in ((False, 4), (True, 6)):
                p.begin_transaction()
                for r in records[:upto]:
                    p.send(sink, r.value.replace(b"in", b"out"))
                p.send_offsets_to_transaction({tp: OffsetAndMetadata(upto, "", -1)},
                                              consumer.group_metadata())
                (p.commit_transaction if commit else p.abort_transaction)()
                assert consumer.committed(tp) == (upto if commit else None)
    finally:
        consumer.close()
    assert [v for _, v in _values(kafka_txn, sink, expected_count=6)] == \
        [b"out%d" % i for i in range(6)]


def test_prepared_transaction_finished_by_another_producer(kafka_txn, topic):
    name = topic(1, cluster=kafka_txn)
    prepared = []
    for n in range(2):
        p = _producer(kafka_txn, "prep-%d-%s" % (n, name))
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"p%d" % n)
        prepared.append(p.prepare_transaction())
        with pytest.raises(errors.IllegalStateError):
            p.send(name, b"after")
        p.close()  # leaves it open
    assert prepared[0].transaction_version == kafka_txn.transaction_version
    for n, prep in enumerate(prepared):
        with _producer(kafka_txn, prep.transactional_id) as q:
            q.resume_transaction(prep)
            (q.commit_transaction if n == 0 else q.abort_transaction)()
    assert _values(kafka_txn, name, expected_count=1) == [(0, b"p0")]
