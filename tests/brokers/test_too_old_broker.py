"""A broker below what pyprod supports (Apache Kafka 0.10.2.2, issue 43 part 1): every producer
fails at once, in its constructor, with IncompatibleBrokerVersion naming what ApiVersions says of
the broker (Produce v2 max: Kafka 0.10.x) and the oldest supported (0.11.0): never a hang until
max_block_ms, never a record lost silently (confluent-kafka reads the topic back empty). With
kafka-python's api_version=(0, 10, 1) (no probe in the constructor) the first send fails so."""

from __future__ import annotations

import uuid

import pytest

import pyprod
from pyprod import errors
from tests.harness.broker_matrix import selected_versions, start_broker
from tests.harness.readback import read_all_confluent

REFUSAL = r"Produce v2 max \(Apache Kafka 0\.10\.x\).*Apache Kafka 0\.11\.0 or newer"


@pytest.fixture(scope="module", params=selected_versions(refused=True))
def old_broker(request):
    cluster = start_broker(request.param)
    yield cluster
    cluster.stop(timeout=15)


@pytest.mark.parametrize("config", [
    {}, {"enable_idempotence": False, "acks": 1}, {"transactional_id": "too-old"},
    {"enable_idempotence": False, "compression_type": "gzip", "acks": 0},
    {"api_version": (0, 10, 1)}],  # kafka-python would write v1 message sets: pyprod cannot
    ids=["default", "no-idempotence", "transactional", "gzip-acks0", "api_version-0.10.1"])
def test_too_old_broker_refused(old_broker, config):
    topic = old_broker.create_topic(f"old-{uuid.uuid4().hex[:12]}", 1)
    with pytest.raises(errors.IncompatibleBrokerVersion, match=REFUSAL):
        with pyprod.KafkaProducer(bootstrap_servers=old_broker.bootstrap_servers,
                                  max_block_ms=30000, **config) as p:
            p.send(topic, b"v", key=b"k").get(30)  # refused in the constructor already
    assert read_all_confluent(old_broker.bootstrap_servers, topic, timeout=5) == []


def test_too_old_broker_refused_over_sasl(old_broker):
    """SASL_PLAINTEXT/SCRAM: ApiVersions comes first, the same refusal."""
    with pytest.raises(errors.IncompatibleBrokerVersion, match=REFUSAL):
        pyprod.KafkaProducer(max_block_ms=30000, **old_broker.scram_config()).close()
