"""Self-tests of the broker harness (pyprod.local_broker, tests.harness), using only third-party
clients."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import kcore
import pyprod
from pyprod.local_broker.processes import free_ports
from tests.harness.kafka_cluster import KafkaCluster
from tests.harness.readback import (Record, Sent, compare, read_all_confluent,
                                     read_all_kafka_python)

BASE_TS = 1_700_000_000_000


def produce_kafka_python(bootstrap, topic, n, *, acks=1, key_space=17, **cfg):
    """Send ``n`` records with keys, headers and explicit timestamps; return the Sent list."""
    from kafka import KafkaProducer

    # One request in flight: a NOT_LEADER retry right after topic creation must not reorder.
    cfg.setdefault("max_in_flight_requests_per_connection", 1)
    prod = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5, **cfg)
    try:
        futures = []
        for i in range(n):
            key = None if i % 10 == 9 else f"key-{i % key_space}".encode()
            value = b"" if i % 50 == 7 else f"value-{i}".encode() * (1 + i % 5)
            headers = [("seq", str(i).encode()), ("empty", b"")] if i % 3 else []
            if i % 7 == 0:
                headers.append(("bin", bytes(range(256))))  # kafka-python refuses None values
            ts = BASE_TS + i * 11
            fut = prod.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
            futures.append((key, value, headers, ts, fut))
        prod.flush(30)
        sent = []
        for key, value, headers, ts, fut in futures:
            md = fut.get(30)
            sent.append(Sent(key, value, headers, ts, md.partition, md.offset))
        return sent
    finally:
        prod.close(5)


def require_real_kafka(broker):
    if not isinstance(broker, KafkaCluster):
        pytest.skip("needs Apache Kafka (the `kafka` fixture fell back to tansu)")


# -- single node ---------------------------------------------------------------------------------

def test_single_node_roundtrip_both_readers(kafka, topic):
    t = topic()  # 6 partitions
    sent = produce_kafka_python(kafka.bootstrap_servers, t, 400)
    assert len({s.partition for s in sent}) > 1
    via_kp = read_all_kafka_python(kafka.bootstrap_servers, t, len(sent), timeout=30)
    via_ck = read_all_confluent(kafka.bootstrap_servers, t, len(sent), timeout=30)
    compare(sent, via_kp)
    compare(sent, via_ck)
    assert via_kp == via_ck
    # without partitions the comparison falls back to per-key order
    compare([s._replace(partition=None, offset=None) for s in sent], via_kp)


def test_topic_factory_partitions(kafka, topic):
    t1, t2 = topic(), topic(partitions=2)
    assert t1 != t2
    if isinstance(kafka, KafkaCluster):
        md = kafka.admin().list_topics(timeout=10).topics
        assert len(md[t1].partitions) == 6 and len(md[t2].partitions) == 2
        assert kafka.leader_of(t2, 1) == 0


def test_empty_topic_reads_nothing(kafka, topic):
    t = topic(partitions=3)
    assert read_all_kafka_python(kafka.bootstrap_servers, t, timeout=20) == []
    assert read_all_confluent(kafka.bootstrap_servers, t, timeout=20) == []


def test_restart_keeps_data(kafka, topic):
    require_real_kafka(kafka)
    t = topic(partitions=3)
    sent = produce_kafka_python(kafka.bootstrap_servers, t, 60, acks="all")
    t0 = time.monotonic()
    kafka.stop_node(0)
    assert not kafka.is_running(0)
    kafka.start_node(0)
    restart = time.monotonic() - t0
    compare(sent, read_all_confluent(kafka.bootstrap_servers, t, len(sent), timeout=60))
    more = produce_kafka_python(kafka.bootstrap_servers, t, 30)
    compare(sent + more, read_all_kafka_python(kafka.bootstrap_servers, t, 90, timeout=30))
    print(f"single-node restart took {restart:.1f}s")


# -- three nodes ---------------------------------------------------------------------------------

def test_three_nodes_acks_all_and_failover(kafka3, topic):
    t = topic(3, cluster=kafka3, replication_factor=3)
    md = kafka3.admin().list_topics(t, timeout=10).topics[t]
    assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in md.partitions.values())
    assert {kafka3.leader_of(t, p) for p in range(3)} <= {0, 1, 2}
    sent = produce_kafka_python(kafka3.bootstrap_servers, t, 120, acks="all")
    compare(sent, read_all_confluent(kafka3.bootstrap_servers, t, len(sent), timeout=30))

    # crash the leader of partition 0: another replica takes over, nothing acked is lost,
    # and acks=all still works with 2 of 3 in sync (min.insync.replicas=2)
    victim = kafka3.leader_of(t, 0)
    kafka3.kill_node(victim)
    deadline = time.monotonic() + 30
    while kafka3.leader_of(t, 0) == victim:
        assert time.monotonic() < deadline, "no leader election after kill"
        time.sleep(0.2)
    live = ",".join(kafka3.node_bootstrap(i) for i in range(3) if i != victim)
    more = produce_kafka_python(live, t, 60, acks="all")
    compare(sent + more, read_all_kafka_python(live, t, 180, timeout=30))
    kafka3.start_node(victim)
    assert kafka3.is_running(victim)


# -- tansu ----------------------------------------------------------------------------------------

def test_tansu_metadata_and_produce(tansu):
    from kafka import KafkaAdminClient, KafkaProducer

    t = tansu.create_topic("harness-tansu", 3)
    admin = KafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
    try:
        assert len(admin.describe_cluster()["brokers"]) == 1
        assert len(admin.describe_topics([t])[0]["partitions"]) == 3
    finally:
        admin.close()
    prod = KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, acks=1)
    try:
        mds = [prod.send(t, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3).get(10)
               for i in range(9)]
    finally:
        prod.close(5)
    assert sorted(m.offset for m in mds if m.partition == 0) == [0, 1, 2]


# -- librdkafka mock cluster ------------------------------------------------------------------------

def test_mock_cluster_loopback_and_produce(mock_cluster):
    from confluent_kafka import Producer

    from tests.harness.mock_cluster import ApiKey, Err

    hosts = mock_cluster.bootstrap_servers.split(",")
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts)
    listening = mock_cluster.listen_addresses()
    assert sorted(p for _, p in listening) == sorted(int(h.split(":")[1]) for h in hosts)
    assert {ip for ip, _ in listening} == {"127.0.0.1"}, listening

    mock_cluster.topic_create("mocked", 4, 3)
    mock_cluster.partition_set_leader("mocked", 0, 2)
    mock_cluster.broker_set_rtt(2, 20)
    mock_cluster.start_request_tracking()
    # two retriable failures of the next Produce requests: the client must retry through them
    mock_cluster.push_request_errors(ApiKey.Produce, [Err.NOT_LEADER_FOR_PARTITION,
                                                      Err.REQUEST_TIMED_OUT])
    results = []
    prod = Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0,
                     "retry.backoff.ms": 10})
    for i in range(5):
        prod.produce("mocked", value=b"v%d" % i, partition=0,
                     on_delivery=lambda err, msg: results.append((err, msg.offset())))
    assert prod.flush(20) == 0
    assert [e for e, _ in results] == [None] * 5
    assert sorted(o for _, o in results) == [0, 1, 2, 3, 4]
    produce_brokers = {b for b, key, _ in mock_cluster.get_requests() if key == ApiKey.Produce}
    assert produce_brokers == {2}

    mock_cluster.broker_set_down(3)
    mock_cluster.broker_set_up(3)
    mock_cluster.set_apiversion(ApiKey.Produce, 3, 9)


def test_mock_cluster_kafka_python(mock_cluster):
    # kafka-python 3.0.12 cannot parse the mock's answer to its ApiVersions v4 probe;
    # pinning api_version skips the probe
    from kafka import KafkaProducer

    mock_cluster.topic_create("kp", 2, 1)
    prod = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, api_version=(2, 0, 0))
    try:
        md = prod.send("kp", value=b"x", partition=1).get(10)
    finally:
        prod.close(5)
    assert (md.partition, md.offset) == (1, 0)


def test_mock_cluster_bad_input(mock_cluster):
    from tests.harness.mock_cluster import MockClusterError

    with pytest.raises(TypeError):
        mock_cluster.broker_set_rtt("1", 5)
    with pytest.raises(ValueError):
        mock_cluster.set_apiversion(0, 0, 1 << 20)
    with pytest.raises(ValueError):
        mock_cluster.topic_create("x", 1, 4)  # more replicas than brokers
    with pytest.raises(MockClusterError, match="BROKER_NOT_AVAILABLE|UNKNOWN_BROKER"):
        mock_cluster.broker_set_down(99)
    assert mock_cluster.is_running()


# -- readback.compare (no broker) -------------------------------------------------------------------

def _rec(p, o, k, v, h=(), ts=5):
    return Record(p, o, k, v, list(h), ts)


def test_compare_reports_first_difference():
    read = [_rec(0, 0, b"a", b"1"), _rec(0, 1, b"a", b"2"), _rec(1, 0, b"b", b"3")]
    ok = [Sent(b"a", b"1", [], 5, 0), Sent(b"a", b"2", [], 5, 0), Sent(b"b", b"3", [], 5, 1)]
    compare(ok, read)
    compare([s._asdict() for s in ok], read)
    with pytest.raises(AssertionError, match="sent 2 records but read 3"):
        compare(ok[:2], read)
    with pytest.raises(AssertionError, match=r"partition 0 record #1 .*value sent b'X' read b'2'"):
        compare([ok[0], ok[1]._replace(value=b"X"), ok[2]], read)
    with pytest.raises(AssertionError, match="headers"):
        compare([ok[0]._replace(headers=[("h", b"1")]), ok[1], ok[2]], read)
    with pytest.raises(AssertionError, match="timestamp sent 6 read 5"):
        compare([ok[0]._replace(timestamp=6), ok[1], ok[2]], read)
    with pytest.raises(AssertionError, match="offset"):
        compare([ok[0]._replace(offset=3), ok[1], ok[2]], read)
    # per-key mode catches reordering within a key
    swapped = [Sent(b"a", b"2"), Sent(b"a", b"1"), Sent(b"b", b"3")]
    with pytest.raises(AssertionError, match="key b'a' record #0"):
        compare(swapped, read)


# -- Java tools on the same classpath ----------------------------------------------------------------

def test_java_producer_performance(kafka, topic):
    require_real_kafka(kafka)
    from tests.harness.kafka_cluster import java_command

    t = topic(partitions=2)
    argv = java_command("org.apache.kafka.tools.ProducerPerformance", "--topic", t,
                        "--num-records", "2000", "--record-size", "50", "--throughput", "-1",
                        "--command-property", f"bootstrap.servers={kafka.bootstrap_servers}",
                        "acks=all")
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "2000 records sent" in res.stdout
    assert len(read_all_kafka_python(kafka.bootstrap_servers, t, 2000, timeout=30)) == 2000


# -- CLI --------------------------------------------------------------------------------------------

@pytest.mark.skipif(sys.platform != "linux", reason="signals + /proc")
def test_cli_prints_bootstrap_and_stops_on_sigterm(kafka):
    require_real_kafka(kafka)  # also: only where a JVM broker can start
    env = dict(os.environ)
    # the child imports the kcore and pyprod this process runs (scripts/pythons.sh: a private
    # kcore compiled for the interpreter, ahead of the checkout's src/)
    here = [os.path.dirname(os.path.dirname(m.__file__)) for m in (kcore, pyprod)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in [*here, env.get("PYTHONPATH")] if p))
    port = free_ports(1)[0]
    proc = subprocess.Popen([sys.executable, "-m", "pyprod.local_broker.cli", "--port", str(port),
                             "--topic", "cli-topic:2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("127.0.0.1:"), proc.stderr.read() if not line else line
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": line}).list_topics(timeout=10)
        assert len(md.topics["cli-topic"].partitions) == 2
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
