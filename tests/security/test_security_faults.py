"""Secured connections under faults: a broker restart mid-stream over SASL_SSL with idempotence,
and KIP-368 re-authentication every ~9 s over a 40 s stream. Nothing lost, nothing duplicated,
order kept per partition (read back by an independent client)."""
import logging
import threading
import time

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all


def paced_stream(producer, topic, n, seconds, sent, futures):
    """Send n keyed records spread over about `seconds`."""
    start = time.monotonic()
    for i in range(n):
        r = Sent(b"k%d" % (i % 31), b"value-%d" % i, [("seq", b"%d" % i)])
        futures.append(producer.send(topic, value=r.value, key=r.key, headers=r.headers))
        sent.append(r)
        ahead = start + seconds * (i + 1) / n - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


def test_broker_restart_mid_stream_over_sasl_ssl(kafka_secure_factory):
    cluster = kafka_secure_factory(kerberos=False)
    topic = cluster.create_topic("restart", 3)
    sent, futures = [], []
    config = cluster.client_config("SASL_SSL", mechanism="SCRAM-SHA-256")
    with KafkaProducer(acks="all", linger_ms=5, **config) as producer:
        sender = threading.Thread(target=paced_stream,
                                  args=(producer, topic, 20_000, 10, sent, futures))
        sender.start()
        time.sleep(3)
        cluster.stop_node(0)
        time.sleep(1)
        cluster.start_node(0)
        sender.join()
        producer.flush()
        for f in futures:
            f.get(timeout=120)  # every record acknowledged
    compare(sent, read_all(cluster.bootstrap_servers, topic, expected_count=len(sent)),
            check_timestamps=False)


def test_reauthentication_over_a_40s_stream(kafka_secure, topic, caplog):
    """The REAUTH listener has connections.max.reauth.ms=10000: the producer authenticates
    again on the same connections before each session ends, for every mechanism it uses."""
    name = topic(3, cluster=kafka_secure)
    sent, futures = [], []
    config = kafka_secure.client_config("REAUTH", mechanism="SCRAM-SHA-512")
    with caplog.at_level(logging.DEBUG, logger="pyprod.network_client"):
        with KafkaProducer(linger_ms=5, **config) as producer:
            paced_stream(producer, name, 20_000, 40, sent, futures)
            producer.flush()
            for f in futures:
                f.get(timeout=60)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("re-authenticating" in m for m in messages) >= 3
    assert not [m for m in messages if "disconnected" in m and "idle" not in m]
    compare(sent, read_all(kafka_secure.bootstrap_servers, name, expected_count=len(sent)),
            check_timestamps=False)
