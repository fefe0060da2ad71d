"""batch_max_size on a real broker: a busy producer's open batches grow past batch_size, and the
broker and kafka-python read them unchanged; a grown batch above the topic's max.message.bytes
or the broker's message.max.bytes is split and retried (MESSAGE_TOO_LARGE), never lost.

"Busy" is made deterministic: the broker is paused (SIGSTOP) while its first request is in
flight (max_in_flight 1), so every later record waits in an open batch."""
import threading

import pytest

from pyprod import KafkaProducer
from tests.harness.readback import read_all_kafka_python

WAIT = 120
RECORD = 1000  # value bytes


def _busy_send(kafka, p, name, n):
    """The first record's request hangs on the paused broker; n more records queue meanwhile."""
    first = p.send(name, b"first", partition=0)
    kafka.pause_node(0)
    try:
        threading.Event().wait(0.3)  # the first request is out (linger_ms=0)
        futures = [p.send(name, b"%07d-" % i + b"v" * (RECORD - 8), partition=i % 2)
                   for i in range(n)]
    finally:
        kafka.resume_node(0)
    p.flush(timeout=WAIT)
    assert first.get(0).offset == 0
    return futures


def _check(kafka, name, futures, n):
    for f in futures:
        assert f.exception is None, f.exception
    read = read_all_kafka_python(kafka.bootstrap_servers, name, n + 1, timeout=WAIT)
    read = [r for r in read if r.value != b"first"]
    assert len(read) == n
    got = {(r.partition, r.offset): r.value for r in read}
    for i, f in enumerate(futures):
        md = f.get(0)
        assert got[(md.partition, md.offset)][:8] == b"%07d-" % i
    for part in (0, 1):
        seqs = [int(r.value[:7]) for r in read if r.partition == part]
        assert seqs == sorted(seqs), "partition %d out of order" % part


def _metrics(p):
    return p.metrics()["producer-metrics"]


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_busy_producer_sends_batches_past_batch_size(kafka, topic, idempotent):
    name, n = topic(2), 4000
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0,
                       batch_size=16384, enable_idempotence=idempotent,
                       max_in_flight_requests_per_connection=1) as p:
        assert p.config["batch_max_size"] == 960 * 1024
        futures = _busy_send(kafka, p, name, n)
        m = _metrics(p)
    # 16 records of 1 KiB fill batch_size; grown batches hold up to 60x that
    assert (m["record-send-total"] - 1) / (m["batch-total"] - 1) > 32
    _check(kafka, name, futures, n)


def test_batch_max_size_equal_to_batch_size_keeps_javas_batches(kafka, topic):
    name, n = topic(2), 1000
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0,
                       batch_size=16384, batch_max_size=16384,
                       max_in_flight_requests_per_connection=1) as p:
        futures = _busy_send(kafka, p, name, n)
        m = _metrics(p)
    assert (m["record-send-total"] - 1) / (m["batch-total"] - 1) <= 16
    _check(kafka, name, futures, n)


@pytest.mark.parametrize("limit", ["topic", "broker"])
def test_grown_batches_above_the_brokers_limit_are_split(kafka, topic, limit):
    """topic: max.message.bytes 64 KiB under the default batch_max_size (960 KiB); broker:
    batch_max_size 4 MiB above message.max.bytes (about 1 MiB, Kafka's default)."""
    if limit == "topic":
        name, settings = topic(2, configs={"max.message.bytes": 65536}), {}
    else:
        name = topic(2)
        settings = dict(max_request_size=4 << 20, batch_max_size=4 << 20,
                        buffer_memory=64 << 20)
    n = 6000
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0,
                       max_in_flight_requests_per_connection=1, **settings) as p:
        futures = _busy_send(kafka, p, name, n)
        assert _metrics(p).get("batch-split-total", 0) > 0
        # each refusal halved the bound batches grow to, down to the limit
        assert p._accumulator.batch_max_size <= (65536 if limit == "topic" else 1048588)
    _check(kafka, name, futures, n)
