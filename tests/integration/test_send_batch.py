"""KafkaProducer.send_batch against a real Kafka broker, read back by kafka-python and
confluent-kafka consumers: counts, per-partition order, keys, values, headers, timestamps."""
import random
import re
import threading

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as java_murmur2

from pyprod import KafkaProducer, errors
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _rows(n, seed, keyed=True):
    rng = random.Random(seed)
    keys = [None if (not keyed or i % 5 == 0) else b"key-%d" % rng.randrange(40)
            for i in range(n)]
    values = [None if (keys[i] is not None and i % 9 == 0) else
              rng.randbytes(rng.choice([0, 7, 100, 2000])) for i in range(n)]
    headers = [[("h\u00e9", b"%d" % i), ("nul", None)] if i % 3 == 0 else None for i in range(n)]
    stamps = [1_600_000_000_000 + rng.randrange(10**9) for _ in range(n)]
    return keys, values, headers, stamps


def _arrow_headers(headers):
    return pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                     for h in headers], HEADERS_TYPE)


def _counts(read):
    out = {}
    for r in read:
        out[r.partition] = out.get(r.partition, 0) + 1
    return out


def _appended(exc):
    return int(re.search(r"(\d+) of \d+ records were appended", str(exc)).group(1))


def test_lists_round_trip(kafka, topic):
    name = topic(6)
    keys, values, headers, stamps = _rows(3000, seed=1)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as p:
        future = p.send_batch(name, values, keys=keys, headers=headers, timestamps=stamps)
        md = future.get(timeout=60)
    assert md.topic == name and md.record_count == 3000
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=3000)
    compare([Sent(k, v, h or [], t) for k, v, h, t in zip(keys, values, headers, stamps)], read)
    for r in read:
        if r.key is not None:
            assert r.partition == (java_murmur2(r.key) & 0x7fffffff) % 6, r.key
    assert _counts(read) == md.partition_counts


def test_arrow_round_trip_per_partition_order(kafka, topic):
    name = topic(4)
    n = 5000
    keys, values, headers, stamps = _rows(n, seed=2, keyed=False)
    parts = [random.Random(i).randrange(4) for i in range(n)]
    pad = [b"pad"] * 3
    arrow_values = pa.chunked_array([pa.array(pad + values[:1700], pa.large_binary()).slice(3),
                                     pa.array(values[1700:], pa.large_binary())])
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5,
                       compression_type="lz4") as p:
        md = p.send_batch(name, arrow_values, headers=_arrow_headers(headers),
                          partitions=pa.array(parts, pa.int16()),
                          timestamps=pa.array([t * 1000 for t in stamps],
                                              pa.timestamp("us"))).get(60)
    assert md.partition_counts == {q: parts.count(q) for q in range(4)}
    read = read_all_confluent(kafka.bootstrap_servers, name, expected_count=n)
    compare([Sent(None, v, h or [], t, q)
             for v, h, t, q in zip(values, headers, stamps, parts)], read)


def test_arrow_and_lists_land_alike(kafka, topic):
    a, b = topic(6), topic(6)
    keys = [b"k%d" % i for i in range(2000)]
    words = ["w\u00e9%d" % i for i in range(2000)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as p:
        fa = p.send_batch(a, words, keys=keys)
        fb = p.send_batch(b, pa.array(words, pa.string()), keys=pa.array(keys, pa.binary()))
        assert fa.get(60).partition_counts == fb.get(60).partition_counts
    ra = read_all_kafka_python(kafka.bootstrap_servers, a, expected_count=2000)
    rb = read_all_kafka_python(kafka.bootstrap_servers, b, expected_count=2000)
    assert [(r.partition, r.key, r.value) for r in ra] == \
        [(r.partition, r.key, r.value) for r in rb]
    assert {r.value for r in ra} == {w.encode() for w in words}


def test_many_keyless_records_spread_and_all_arrive(kafka, topic):
    name = topic(6)
    n = 200_000
    values = pa.array([b"%0100d" % i for i in range(n)], pa.binary())
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5,
                       batch_size=16384) as p:
        md = p.send_batch(name, values).get(120)
    assert md.record_count == n and len(md.partition_counts) == 6
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=n, timeout=120)
    assert len(read) == n and _counts(read) == md.partition_counts
    assert sorted(int(r.value) for r in read) == list(range(n))
    for q in range(6):  # in call order within each partition
        got = [int(r.value) for r in read if r.partition == q]
        assert got == sorted(got)


def test_too_large_record_fails_by_index(kafka, topic):
    name = topic(3)
    values = [b"a" * 10, b"b" * 5000, b"c" * 10, b"d" * 6000]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_request_size=2000) as p:
        future = p.send_batch(name, values, partitions=[0, 1, 2, 0])
        with pytest.raises(errors.BatchDeliveryError) as info:
            future.get(timeout=60)
    e = info.value
    assert [i for i, _ in e.failures] == [1, 3]
    assert all(isinstance(x, errors.MessageSizeTooLargeError) for _, x in e.failures)
    assert e.failed_count == 2 and e.succeeded_count == 2
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=2)
    compare([Sent(None, values[0], partition=0), Sent(None, values[2], partition=2)], read,
            check_timestamps=False)


def test_broker_refusal_fails_by_index(kafka, topic):
    name = topic(3, configs={"max.message.bytes": "2000"})
    values = [b"ok-0", b"x" * 5000, b"ok-2", b"ok-3"]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as p:
        p.send(name, b"warm", partition=1).get(30)
        future = p.send_batch(name, values, partitions=[0, 1, 2, 0])
        p.flush()
        assert future.is_done
        e = future.exception
    assert isinstance(e, errors.BatchDeliveryError)
    assert [i for i, _ in e.failures] == [1]
    assert isinstance(e.failures[0][1], errors.MessageSizeTooLargeError)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=4)
    assert sorted(r.value for r in read) == [b"ok-0", b"ok-2", b"ok-3", b"warm"]


def test_full_buffer_blocks_then_times_out(kafka, memory_blocked):
    with memory_blocked() as (p, name, info):
        p.send_batch(name, pa.array([b"x" * 1000] * 1000))
    appended = _appended(info.value)
    assert 0 < appended < 1000
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=appended + 1)
    assert len(read) == appended + 1  # what was appended before the timeout was delivered


@pytest.mark.parametrize("bad, error", [
    (dict(values=[b"a", 1]), TypeError),
    (dict(values=[b"a", b"b"], keys=[b"k"]), ValueError),
    (dict(values=pa.array([1, 2])), TypeError),
    (dict(values=[b"a", b"b"], headers=pa.array([[1], [2]])), TypeError),
    (dict(values=[b"a", b"b"], timestamps=[1, -1]), ValueError),
    (dict(values=pa.array([b"a", b"b"]), partitions=pa.array([0, -1])), ValueError),
], ids=["int value", "lengths", "int array", "headers type", "timestamp", "partition"])
def test_bad_input_is_refused_before_anything_is_sent(kafka, topic, bad, error):
    name = topic(2)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as p:
        with pytest.raises(error):
            p.send_batch(name, **bad)
        p.send(name, b"marker", partition=0).get(30)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=1)
    assert [r.value for r in read] == [b"marker"]


def test_flush_close_and_after_close(kafka, topic):
    name = topic(3)
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=60_000)
    first = p.send_batch(name, [b"%d" % i for i in range(3000)])
    p.flush()
    assert first.is_done and first.succeeded()
    second = p.send_batch(name, pa.array([b"s%d" % i for i in range(2000)]))
    p.close()
    assert second.succeeded() and second.value.record_count == 2000
    with pytest.raises(errors.IllegalStateError):
        p.send_batch(name, [b"late"])
    assert len(read_all_kafka_python(kafka.bootstrap_servers, name, 5000)) == 5000


def test_callbacks_and_custom_partitioner(kafka, topic):
    name = topic(4)
    seen = []

    def last_partition(key_bytes, all_partitions, available):
        return all_partitions[-1]

    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5,
                       partitioner=last_partition) as p:
        future = p.send_batch(name, [b"a", b"b", None], keys=[b"x", None, b"z"])
        future.add_callback(seen.append).add_errback(seen.append)
        md = future.get(30)
    assert md.partition_counts == {3: 3} and seen == [md]
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=3)
    assert [(r.partition, r.key, r.value) for r in read] == \
        [(3, b"x", b"a"), (3, None, b"b"), (3, b"z", None)]


def test_concurrent_send_and_send_batch(kafka, topic):
    name = topic(3)
    n = 20_000
    errors_seen = []
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=2,
                       batch_size=4096) as p:
        def singles():
            try:
                for i in range(n):
                    p.send(name, b"s%d" % i, partition=i % 3)
            except Exception as e:  # surfaced below
                errors_seen.append(e)

        t = threading.Thread(target=singles)
        t.start()
        futures = [p.send_batch(name, pa.array([b"b%d-%d" % (j, i) for i in range(n // 4)]),
                                partitions=pa.array([i % 3 for i in range(n // 4)], pa.int8()))
                   for j in range(4)]
        t.join()
        for f in futures:
            assert f.get(60).record_count == n // 4
    assert not errors_seen
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=2 * n)
    assert len(read) == 2 * n
    for q in range(3):  # each source keeps its order within a partition
        vals = [r.value for r in read if r.partition == q]
        singles = [int(v[1:]) for v in vals if v.startswith(b"s")]
        batched = [tuple(map(int, v[1:].split(b"-"))) for v in vals if v.startswith(b"b")]
        assert singles == sorted(singles) and len(singles) == len(range(q, n, 3))
        assert batched == sorted(batched)
