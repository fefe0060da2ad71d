"""Idempotent delivery: in order, nothing lost, nothing duplicated, across restarts and failover."""
import collections
import threading
import time

import pytest

from pyprod import KafkaProducer
from tests.harness.kafka_cluster import KafkaCluster
from tests.harness.readback import read_all_kafka_python

WAIT = 300  # bound on every flush and fault (seconds)


def _check_exactly_once(read, n):
    values = [int(r.value) for r in read]
    assert len(values) == len(set(values)), "duplicates: %d" % (len(values) - len(set(values)))
    assert set(values) == set(range(n)), "lost: %d" % len(set(range(n)) - set(values))
    by_partition = collections.defaultdict(list)
    for r in sorted(read, key=lambda r: (r.partition, r.offset)):
        by_partition[r.partition].append(r)
    for records in by_partition.values():
        offsets = [r.offset for r in records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offset gap"
        keyed = collections.defaultdict(list)
        for r in records:
            keyed[r.key].append(int(r.value))
        assert all(v == sorted(v) for v in keyed.values()), "per-key order broken"


def test_200k_records_five_in_flight(kafka, topic):
    name = topic(6)
    n = 200_000
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                       max_in_flight_requests_per_connection=5, linger_ms=2,
                       batch_size=8192) as p:
        futures = [p.send(name, b"%d" % i, key=b"%d" % (i % 97)) for i in range(n)]
        p.flush(timeout=WAIT)
    assert all(f.succeeded() for f in futures)
    _check_exactly_once(read_all_kafka_python(kafka.bootstrap_servers, name, n), n)


def _stream(producer, name, n, pause_at, action, first=None):
    """Send n records; at pause_at run first() inline, then action() in a thread."""
    futures = []
    fault = threading.Thread(target=action, daemon=True)
    for i in range(n):
        if i == pause_at:
            if first is not None:
                first()
            fault.start()
        futures.append(producer.send(name, b"%d" % i, key=b"%d" % (i % 13)))
        if i % 500 == 0:
            time.sleep(0.01)  # spread the stream over the fault
    producer.flush(timeout=WAIT)
    fault.join(WAIT)
    assert not fault.is_alive()
    return futures


@pytest.fixture(scope="module")
def single():
    """A one-node cluster of this module's own, to restart and pause."""
    cluster = KafkaCluster(nodes=1).start()
    yield cluster
    cluster.stop()


def test_restart_single_node_mid_stream(single):
    name = single.create_topic("restart", 3)
    n = 30_000
    with KafkaProducer(bootstrap_servers=single.bootstrap_servers,
                       delivery_timeout_ms=120_000, request_timeout_ms=5000, linger_ms=2) as p:
        futures = _stream(p, name, n, n // 3,
                          lambda: (single.stop_node(0), single.start_node(0)))
    assert all(f.succeeded() for f in futures)
    _check_exactly_once(read_all_kafka_python(single.bootstrap_servers, name, n), n)


def test_hung_broker_answers_late_without_duplicates(single):
    """The broker stops answering for longer than request_timeout_ms: requests time out and
    their batches are resent, but the broker wrote some of them already. Same producer id and
    sequences on the resend, so it keeps one copy and says so."""
    name = single.create_topic("paused", 3)
    n = 20_000

    def resume_later():
        time.sleep(4.0)  # twice the request timeout
        single.resume_node(0)

    with KafkaProducer(bootstrap_servers=single.bootstrap_servers, request_timeout_ms=2000,
                       linger_ms=2, reconnect_backoff_max_ms=1000) as p:
        for partition in range(3):  # connected, with a producer id and acknowledged sequences
            p.send(name, b"-1", key=b"warm", partition=partition).get(timeout=WAIT)
        try:  # the rest of the stream goes to a broker that reads but does not answer
            futures = _stream(p, name, n, n // 3, resume_later, lambda: single.pause_node(0))
        finally:
            single.resume_node(0)
        timeouts = p.metrics()["producer-metrics"].get("record-retry-total", 0)
    assert all(f.succeeded() for f in futures)
    assert timeouts > 0  # the hang did catch requests in flight
    read = read_all_kafka_python(single.bootstrap_servers, name, n + 3)
    _check_exactly_once([r for r in read if r.key != b"warm"], n)


def test_kill_leader_on_three_nodes_acks_all(kafka3, topic):
    name = topic(3, cluster=kafka3, replication_factor=3, configs={"min.insync.replicas": "2"})
    victim = kafka3.leader_of(name, 0)
    n = 30_000
    with KafkaProducer(bootstrap_servers=kafka3.bootstrap_servers, acks="all",
                       request_timeout_ms=5000, linger_ms=2) as p:
        futures = _stream(p, name, n, n // 3, lambda: kafka3.kill_node(victim))
    try:
        acked = [i for i, f in enumerate(futures) if f.succeeded()]
        read = read_all_kafka_python(kafka3.bootstrap_servers, name, len(acked))
        values = [int(r.value) for r in read]
        assert len(values) == len(set(values)), "duplicates after failover"
        assert set(acked) <= set(values), "acknowledged records lost"
        assert len(acked) == n  # with retries and delivery_timeout, everything got through
    finally:
        kafka3.start_node(victim)
