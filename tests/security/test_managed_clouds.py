"""Azure Event Hubs' Kafka endpoint and Confluent Cloud's API keys: the exact client settings
docs/security.md gives (SASL_SSL + PLAIN, username "$ConnectionString" and the namespace's
connection string as the password; an API key and secret) against a local Apache Kafka that
speaks the same protocol (PLAIN over TLS, the users below in its JAAS). Read back by
kafka-python and confluent-kafka with the same settings; a wrong secret is refused, typed, and
never shown."""
import logging
import traceback
import uuid

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_confluent, read_all_kafka_python

# the shape of an Event Hubs namespace's connection string (';' and '=' inside the password)
CONN = ("Endpoint=sb://pyprod-test.servicebus.windows.net/;SharedAccessKeyName="
        "RootManageSharedAccessKey;SharedAccessKey=c2VjcmV0LWtleS1ub3QtcmVhbA+/=")
API_KEY, API_SECRET = "PYPRODCCLOUDKEY1", "cflt+API/secret=not-real"
USERS = {"$ConnectionString": CONN, API_KEY: API_SECRET}


@pytest.fixture(scope="module")
def cloudlike():
    """A private secured broker whose SASL_SSL listener knows the users above (PLAIN)."""
    from tests.harness.security import SecureKafkaCluster
    users = " ".join('user_%s="%s"' % kv for kv in USERS.items())
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required %s;" % users
    cluster = SecureKafkaCluster(kerberos=False, broker_props={
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas})
    cluster.start()
    yield cluster
    cluster.stop(kill=True)


def _settings(cluster, username, password):
    """docs/security.md's settings; ssl_cafile only because the local CA is not a public one."""
    return {"bootstrap_servers": cluster.listener("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": username,
            "sasl_plain_password": password, "ssl_cafile": cluster.certs.ca_file}


@pytest.mark.parametrize("username", ["$ConnectionString", API_KEY],
                         ids=["event-hubs", "confluent-cloud"])
def test_produce_and_read_back(cloudlike, username):
    settings = _settings(cloudlike, username, USERS[username])
    topic = "cloud-" + uuid.uuid4().hex[:8]
    cloudlike.create_topic(topic, partitions=2)
    with KafkaProducer(**settings) as producer:
        for i in range(20):
            producer.send(topic, b"v%d" % i, key=b"k%d" % (i % 4))
        producer.flush()
    for read in (read_all_kafka_python, read_all_confluent):
        got = read(cloudlike.listener("SASL_SSL"), topic, 20, security=settings)
        assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(20))


@pytest.mark.parametrize("username", ["$ConnectionString", API_KEY],
                         ids=["event-hubs", "confluent-cloud"])
def test_wrong_secret_refused(cloudlike, username, caplog):
    wrong = USERS[username].replace("=", "#")
    with caplog.at_level(logging.DEBUG, logger="pyprod"):
        with pytest.raises(errors.SaslAuthenticationFailedError) as info:
            KafkaProducer(bootstrap_timeout_ms=60_000,
                          **_settings(cloudlike, username, wrong)).close()
    shown = caplog.text + "".join(traceback.format_exception(info.value))
    assert wrong not in shown and USERS[username] not in shown
