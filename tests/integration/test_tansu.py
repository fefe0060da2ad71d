"""Smoke run against tansu, a second, independent broker implementation (in-memory storage),
read back with kafka-python and confluent-kafka."""
import pytest

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

N = 400
WAIT = 30


def _records(n):
    return [Sent(b"key-%d" % (i % 17) if i % 5 else None, b"value-%d" % i,
                 [("i", b"%d" % i), ("none", None)] if i % 3 == 0 else [],
                 1_700_000_000_000 + i) for i in range(n)]


def _send(producer, name, records):
    futures = [producer.send(name, r.value, key=r.key, headers=r.headers,
                             timestamp_ms=r.timestamp) for r in records]
    producer.flush(timeout=WAIT)
    return futures


@pytest.mark.parametrize("acks", [1, 0])
def test_tansu_round_trip(tansu, acks):
    name = tansu.create_topic("smoke-acks%d" % acks, 3)
    records = _records(N)
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, acks=acks, linger_ms=5,
                       enable_idempotence=False) as p:
        futures = _send(p, name, records)
    assert all(f.succeeded() for f in futures), [f.exception for f in futures if f.failed()][:3]
    read = read_all_kafka_python(tansu.bootstrap_servers, name, N, timeout=WAIT)
    compare(records, read)
    if acks:
        at = {(r.partition, r.offset): r.value for r in read}
        assert all(at[(f.value.partition, f.value.offset)] == r.value
                   for f, r in zip(futures, records))
    else:
        assert all(f.value.offset == -1 for f in futures)  # acks=0: nothing to report


def test_tansu_idempotent_acks_all(tansu):
    name = tansu.create_topic("smoke-idempotent", 3)
    records = _records(N)
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, linger_ms=5,
                       compression_type="gzip") as p:
        futures = _send(p, name, records)
    assert all(f.succeeded() for f in futures), [f.exception for f in futures if f.failed()][:3]
    compare(records, read_all_confluent(tansu.bootstrap_servers, name, N, timeout=WAIT))
