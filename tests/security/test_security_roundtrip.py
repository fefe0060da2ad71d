"""pyprod over every secured listener of a real Kafka broker: TLS, mutual TLS and each SASL
mechanism, 20k keyed records with headers, read back by an independent client over the same
listener by kafka-python (exactly once, in order per partition)."""
import random

import pytest

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all

N = 20_000
CASES = [("SSL", None), ("MTLS", None)] + [
    (listener, mech) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
    for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")]


def records(n, seed):
    rng = random.Random(seed)
    return [Sent(b"key-%d" % rng.randrange(100), rng.randbytes(rng.choice((0, 10, 100, 1000))),
                 [("i", b"%d" % i)] if i % 2 else [], 1_700_000_000_000 + i) for i in range(n)]


def produce(producer, topic, sent):
    futures = [producer.send(topic, value=r.value, key=r.key, headers=r.headers,
                             timestamp_ms=r.timestamp) for r in sent]
    producer.flush()
    for f in futures:
        f.get(timeout=60)


@pytest.mark.parametrize("listener,mechanism", CASES,
                         ids=["%s-%s" % (lst, m) if m else lst for lst, m in CASES])
def test_round_trip(kafka_secure, topic, listener, mechanism):
    name = topic(3, cluster=kafka_secure)
    config = kafka_secure.client_config(listener, mechanism=mechanism)
    sent = records(N, seed=hash((listener, mechanism)) & 0xffff)
    with KafkaProducer(linger_ms=5, **config) as producer:
        produce(producer, name, sent)
    # read back by kafka-python over the same secured listener
    compare(sent, read_all(config["bootstrap_servers"], name, expected_count=N, security=config))


def test_encrypted_client_key_and_user_context(kafka_secure, topic):
    """mTLS with a key encrypted by ssl_password, then with the user's own SSLContext."""
    import ssl
    name = topic(1, cluster=kafka_secure)
    certs = kafka_secure.certs
    config = kafka_secure.client_config("MTLS")
    config.update(ssl_keyfile=certs.client_key_encrypted, ssl_password=certs.client_key_password)
    with KafkaProducer(**config) as producer:
        producer.send(name, b"encrypted-key").get(timeout=30)
    ctx = ssl.create_default_context(cafile=certs.ca_file)
    ctx.load_cert_chain(certs.client_cert, certs.client_key)
    config = kafka_secure.client_config("MTLS")
    config.update(ssl_context=ctx, ssl_cafile="/nonexistent", ssl_certfile="/nonexistent")
    with KafkaProducer(**config) as producer:  # the context wins: the bad paths are not read
        producer.send(name, b"user-context").get(timeout=30)
    read = read_all(kafka_secure.bootstrap_servers, name, expected_count=2)
    assert [r.value for r in read] == [b"encrypted-key", b"user-context"]


def test_send_batch_over_sasl_ssl(kafka_secure, topic):
    name = topic(6, cluster=kafka_secure)
    values = [b"v%d" % i for i in range(50_000)]
    keys = [b"k%d" % (i % 97) for i in range(50_000)]
    with KafkaProducer(linger_ms=5, **kafka_secure.client_config(
            "SASL_SSL", mechanism="SCRAM-SHA-512")) as producer:
        md = producer.send_batch(name, values, keys=keys).get(timeout=60)
    assert md.record_count == 50_000
    compare([Sent(k, v) for k, v in zip(keys, values)],
            read_all(kafka_secure.bootstrap_servers, name, expected_count=50_000),
            check_timestamps=False)
