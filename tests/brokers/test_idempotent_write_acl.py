"""Idempotence by default (KIP-679) on a broker with an authorizer, where the SASL user may
write the topic but holds no IDEMPOTENT_WRITE on the cluster (issue 43 part 1).

Before Kafka 2.8 the broker refuses InitProducerId without that ACL (KAFKA-13598): like Java's
producer (Sender: a fatal ClusterAuthorizationException, the batches aborted; no fallback to
non-idempotent sends), every send fails at once with ClusterAuthorizationFailedError, bounded,
and nothing is written; enable_idempotence=False writes. From 2.8 (KIP-679) WRITE on any topic
authorizes InitProducerId: the idempotent default just works. Runs on the selected ZooKeeper
versions with SASL (1.0 to 3.x)."""

from __future__ import annotations

import uuid

import pytest

import pyprod
from pyprod import errors
from pyprod.local_broker.jars import version_tuple
from tests.harness.broker_matrix import BY_VERSION, selected_versions, start_broker, supports
from tests.harness.readback import read_all_confluent, read_all_kafka_python
from tests.harness.waits import wait_until

VERSIONS = [v for v in selected_versions()
            if BY_VERSION[v].zookeeper and supports(v, "sasl")]


def _authorizer(version: str) -> str:
    if version_tuple(version) >= (2, 4):
        return "kafka.security.authorizer.AclAuthorizer"
    return "kafka.security.auth.SimpleAclAuthorizer"


@pytest.fixture(scope="module", params=VERSIONS)
def acl_broker(request):
    cluster = start_broker(request.param, broker_props={
        "authorizer.class.name": _authorizer(request.param),
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: topics, read-back
        "allow.everyone.if.no.acl.found": "false"})
    try:
        cluster.acl_command("--add", "--allow-principal", "User:alice", "--operation", "Write",
                            "--operation", "Describe", "--topic", "*")
        yield cluster
    finally:
        cluster.stop(timeout=15)


def _can_write(cluster, topic) -> bool:
    """alice's topic WRITE has reached the broker (a non-idempotent send as alice lands)."""
    try:
        with pyprod.KafkaProducer(enable_idempotence=False, max_block_ms=5000,
                                  **cluster.scram_config()) as p:
            p.send(topic, b"probe").get(10)
        return True
    except errors.KafkaError:
        return False


def test_idempotent_default_without_idempotent_write(acl_broker):
    topic = acl_broker.create_topic(f"acl-{uuid.uuid4().hex[:12]}", 1)
    wait_until(lambda: _can_write(acl_broker, topic), "alice's WRITE ACL", timeout=60)
    sent = [b"probe"]
    if supports(acl_broker.version, "idempotent_write_by_topic"):  # KIP-679
        with pyprod.KafkaProducer(max_block_ms=30000, **acl_broker.scram_config()) as p:
            assert p.config["enable_idempotence"] is True
            p.send(topic, b"idempotent").get(30)
        sent.append(b"idempotent")
    else:
        for config in ({}, {"enable_idempotence": True}):
            with pytest.raises(errors.ClusterAuthorizationFailedError,
                               match="IdempotentWrite.*enable_idempotence=False"):
                with pyprod.KafkaProducer(max_block_ms=30000, **acl_broker.scram_config(),
                                          **config) as p:
                    p.send(topic, b"refused").get(30)
    with pyprod.KafkaProducer(enable_idempotence=False, max_block_ms=30000,
                              **acl_broker.scram_config()) as p:
        p.send(topic, b"plain").get(30)
    sent.append(b"plain")
    for reader in (read_all_confluent, read_all_kafka_python):  # as the super user
        got = reader(acl_broker.bootstrap_servers, topic, expected_count=len(sent))
        assert sorted(r.value for r in got) == sorted(sent)
