"""KafkaProducer.send_batch against a real Kafka broker, read back with kafka-python."""
import random

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as java_murmur2

from pyprod import KafkaProducer
from pyprod.errors import BatchDeliveryError, MessageSizeTooLargeError
from pyprod.testing.readback import Sent, compare, read_all_kafka_python

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _rows(n, seed, keyed=True):
    rng = random.Random(seed)
    keys = [None if (not keyed or i % 5 == 0) else b"key-%d" % rng.randrange(40)
            for i in range(n)]
    values = [None if (keys[i] is not None and i % 9 == 0) else rng.randbytes(rng.choice([0, 7, 100]))
              for i in range(n)]
    headers = [[("h\u00e9", b"%d" % i), ("nul", None)] if i % 3 == 0 else None for i in range(n)]
    stamps = [1_600_000_000_000 + rng.randrange(10**9) for _ in range(n)]
    return keys, values, headers, stamps


def test_lists_round_trip(kafka, topic):
    name = topic(6)
    keys, values, headers, stamps = _rows(3000, seed=1)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as p:
        future = p.send_batch(name, values, keys=keys, headers=headers, timestamps=stamps)
        md = future.get(timeout=60)
    assert md.topic == name and md.record_count == 3000
    assert sum(md.partition_counts.values()) == 3000
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=3000)
    compare([Sent(k, v, h or [], t) for k, v, h, t in zip(keys, values, headers, stamps)], read)
    for r in read:
        if r.key is not None:
            assert r.partition == (java_murmur2(r.key) & 0x7fffffff) % 6
    counts = {}
    for r in read:
        counts[r.partition] = counts.get(r.partition, 0) + 1
    assert counts == md.partition_counts


def test_arrow_round_trip_and_flush(kafka, topic):
    name = topic(6)
    keys, values, headers, stamps = _rows(2000, seed=2)
    arrow_headers = pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                              for h in headers], HEADERS_TYPE)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=50) as p:
        future = p.send_batch(name, pa.chunked_array([pa.array(values[:700], pa.binary()),
                                                      pa.array(values[700:], pa.binary())]),
                              keys=pa.array(keys, pa.large_binary()), headers=arrow_headers,
                              timestamps=pa.array(stamps, pa.timestamp("ms")))
        p.flush()
        assert future.is_done and future.succeeded()
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=2000)
    compare([Sent(k, v, h or [], t) for k, v, h, t in zip(keys, values, headers, stamps)], read)


def test_too_large_record_fails_by_index(kafka, topic):
    name = topic(3)
    values = [b"a" * 10, b"b" * 5000, b"c" * 10, b"d" * 6000]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_request_size=2000) as p:
        future = p.send_batch(name, values, partitions=[0, 1, 2, 0])
        with pytest.raises(BatchDeliveryError) as info:
            future.get(timeout=60)
    e = info.value
    assert [i for i, _ in e.failures] == [1, 3]
    assert all(isinstance(x, MessageSizeTooLargeError) for _, x in e.failures)
    assert e.failed_count == 2 and e.succeeded_count == 2
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=2)
    compare([Sent(None, values[0], partition=0), Sent(None, values[2], partition=2)], read,
            check_timestamps=False)
