"""pyprod.KafkaProducer against a real Apache Kafka broker, read back by other clients."""
import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _records(n, seed, keyed=True, big=False):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if (not keyed or i % 7 == 0) else b"key-%d" % rng.randrange(50)
        value = None if (key is not None and i % 11 == 0) else rng.randbytes(
            rng.choice([0, 1, 100, 1000] + ([50_000] if big else [])))
        headers = [("h\u00e9", b"v%d" % i), ("null", None)] if i % 3 == 0 else []
        out.append(Sent(key, value, headers, 1_600_000_000_000 + rng.randrange(10**9)))
    return out


def _produce(producer, topic, records):
    futures = [producer.send(topic, value=r.value, key=r.key, headers=r.headers,
                             timestamp_ms=r.timestamp) for r in records]
    producer.flush()
    return [f.get(timeout=30) for f in futures]


def _warm(kafka, name, partitions):
    """acks=0 gets no answer, so a record sent before a new topic's leaders are really up is
    lost (the broker just closes the connection). Wait for them with acknowledged records."""
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks=1) as p:
        for i in range(partitions):
            p.send(name, b"warm", key=b"__warm__", partition=i).get(timeout=30)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_and_codecs_round_trip(kafka, topic, acks, codec):
    name = topic(3)
    _warm(kafka, name, 3)
    records = _records(300, seed=hash((acks, codec)) & 0xffff)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks=acks,
                       compression_type=codec, linger_ms=5,
                       enable_idempotence=acks == "all") as producer:
        metadata = _produce(producer, name, records)
    reader = read_all_confluent if codec in ("zstd", "snappy") else read_all_kafka_python
    read = reader(kafka.bootstrap_servers, name, expected_count=len(records) + 3)
    read = [r for r in read if r.key != b"__warm__"]
    compare(records, read)
    if acks == 0:
        assert all(m.offset == -1 for m in metadata)
    else:
        by_pos = {(r.partition, r.offset): r for r in read}
        for m, sent in zip(metadata, records):
            assert by_pos[(m.partition, m.offset)].value == sent.value


def test_keyed_records_land_where_java_puts_them(kafka, topic):
    name = topic(7)
    keys = [b"k%d-%s" % (i, random.Random(i).randbytes(5).hex().encode()) for i in range(10_000)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as producer:
        for key in keys:
            producer.send(name, value=b"v", key=key)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=len(keys))
    assert len(read) == len(keys)
    for r in read:
        assert r.partition == (kafka_python_murmur2(r.key) & 0x7fffffff) % 7, r.key


def test_null_keys_spread_over_partitions(kafka, topic):
    name = topic(6)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, batch_size=4096,
                       linger_ms=5) as producer:
        for i in range(20_000):
            producer.send(name, value=b"%0100d" % i)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=20_000)
    assert len(read) == 20_000
    assert {r.partition for r in read} == set(range(6))
    assert sorted(int(r.value) for r in read) == list(range(20_000))


def test_headers_and_timestamps_round_trip(kafka, topic):
    name = topic(1)
    records = [Sent(b"k", b"v%d" % i, [("a", b"1"), ("\u00fcml\u00e4ut", None), ("a", b"")],
                    1_000_000_000_000 + i * 86_400_000) for i in range(50)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as producer:
        md = _produce(producer, name, records)
    assert [m.timestamp for m in md] == [r.timestamp for r in records]
    assert md[0].serialized_header_size == len("a") + 1 + len("\u00fcml\u00e4ut".encode()) + 1
    compare(records, read_all_confluent(kafka.bootstrap_servers, name, expected_count=50))


def test_one_megabyte_records_are_delivered(kafka, topic):
    name = topic(2)
    records = [Sent(None, bytes([i]) * 1_000_000) for i in range(5)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as producer:
        _produce(producer, name, records)
    compare(records, read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=5))


def test_serializers_as_in_kafka_python(kafka, topic):
    import json

    name = topic(1)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                       key_serializer=str.encode,
                       value_serializer=lambda v: json.dumps(v).encode()) as producer:
        producer.send(name, {"a": 1}, key="k").get(timeout=30)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=1)
    assert (read[0].key, read[0].value) == (b"k", b'{"a": 1}')
