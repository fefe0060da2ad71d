"""pytest fixtures for tests against real brokers; tests/conftest.py star-imports them.

kafka          one-node Apache Kafka 4.x, session-scoped (falls back to tansu, loudly, when
               Java/Maven/Maven Central are unavailable, or when PYPROD_BROKER=tansu)
kafka3         three-node Kafka cluster (min.insync.replicas=2), session-scoped, started
               only when a test asks for it
topic          factory: topic() -> name of a new 6-partition topic on `kafka`;
               topic(partitions=3, cluster=kafka3, replication_factor=3, configs={...})
kafka_secure   one-node Kafka with SSL, mTLS and SASL listeners and a Kerberos KDC
               (tests.harness.security.SecureKafkaCluster), session-scoped, started only when
               a test asks for it; while it runs, os.environ holds kdc.client_env() so GSSAPI
               clients find their keytab
kafka_secure_factory  factory: kafka_secure_factory(kerberos=False, ...) -> a private, started
               SecureKafkaCluster (to restart or break), stopped after the test
kafka_txn      one-node Kafka formatted with transaction.version=1 or 2 (params "v1", "v2":
               both transaction protocols, KIP-890), timed-out transactions aborted within
               a second; session-scoped
tansu          tansu broker (in-memory), session-scoped
mock_cluster   librdkafka mock cluster with 3 brokers, fresh per test

A failing test gets the tail of the logs of the brokers it used in its report.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import warnings

import pytest

from tests.harness.kafka_cluster import KafkaCluster
from pyprod.local_broker.jars import KafkaLibsUnavailable, java_executable

from .mock_cluster import MockCluster
from .security import SecureKafkaCluster
from .tansu import TansuBroker, tansu_binary

BROKER_FIXTURES = ("kafka", "kafka3", "kafka_secure", "kafka_txn", "tansu", "mock_cluster")


def _loud(msg: str) -> None:
    bar = "!" * 78
    sys.stderr.write(f"\n{bar}\n{msg}\n{bar}\n")
    warnings.warn(msg, stacklevel=2)


def _kafka_unavailable_reason() -> str | None:
    try:
        java_executable()
    except KafkaLibsUnavailable as e:
        return str(e)
    return None


def pytest_configure(config):
    # kafka-python 3.0.12 loads its schemas through deprecated importlib.resources calls
    for msg in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{msg}:DeprecationWarning")


@pytest.fixture(scope="session")
def kafka():
    """A started one-node Kafka cluster (or a TansuBroker stand-in, see module doc)."""
    reason = "PYPROD_BROKER=tansu" if os.environ.get("PYPROD_BROKER") == "tansu" else None
    cluster = None
    if reason is None:
        reason = _kafka_unavailable_reason()
    if reason is None:
        cluster = KafkaCluster(nodes=1)
        try:
            cluster.start()
        except KafkaLibsUnavailable as e:
            reason, cluster = str(e), None
    if cluster is None:
        try:
            tansu_binary()
        except RuntimeError as e:
            _loud(f"NO BROKER AT ALL: Kafka unavailable ({reason.splitlines()[0]}) and {e}")
            pytest.fail("neither Apache Kafka nor tansu can run here")
        _loud(f"NO APACHE KAFKA BROKER ({reason.splitlines()[0]}): the `kafka` fixture is "
              "tansu instead")
        broker = TansuBroker().start()
        yield broker
        broker.stop()
        return
    yield cluster
    cluster.stop(timeout=15)


@pytest.fixture(scope="session")
def kafka3():
    """A started three-node Kafka cluster. Broker tests never skip: no Kafka is a failure."""
    reason = _kafka_unavailable_reason()
    if reason:
        pytest.fail(f"3-node Kafka unavailable: {reason}")
    cluster = KafkaCluster(nodes=3)
    try:
        cluster.start()
    except KafkaLibsUnavailable as e:
        pytest.fail(f"3-node Kafka unavailable: {e}")
    yield cluster
    cluster.stop(kill=True)  # throw-away data: no need for three controlled shutdowns


class _TxnCluster(KafkaCluster):
    def __init__(self, level: int):
        super().__init__(1, broker_props={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 2000})
        self.format_args = ("--feature", f"transaction.version={level}")
        self.transaction_version = level


@pytest.fixture(scope="session", params=["v1", "v2"])
def kafka_txn(request):
    """A one-node Kafka whose transactions use protocol v1 or v2 (KIP-890)."""
    reason = _kafka_unavailable_reason()
    if reason:
        pytest.fail(f"Kafka unavailable: {reason}")
    cluster = _TxnCluster(int(request.param[1]))
    cluster.start()
    yield cluster
    cluster.stop(kill=True)


@pytest.fixture(scope="session")
def kafka_secure():
    """A started SecureKafkaCluster (with KDC); a missing KDC or `cryptography` fails."""
    reason = _kafka_unavailable_reason()
    if reason:
        pytest.fail(f"secured Kafka unavailable: {reason}")
    cluster = SecureKafkaCluster()
    cluster.start()
    saved = {k: os.environ.get(k) for k in cluster.kdc.client_env()}
    os.environ.update(cluster.kdc.client_env())
    yield cluster
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    cluster.stop(kill=True)


@pytest.fixture
def kafka_secure_factory():
    """``kafka_secure_factory(**SecureKafkaCluster kwargs)`` -> a private started cluster."""
    started = []

    def make(**kwargs):
        cluster = SecureKafkaCluster(**kwargs)
        started.append(cluster)
        return cluster.start()

    yield make
    for cluster in started:
        cluster.stop(kill=True)


@pytest.fixture(scope="session")
def tansu():
    try:
        tansu_binary()
    except RuntimeError as e:
        pytest.fail(str(e))
    broker = TansuBroker().start()
    yield broker
    broker.stop()


@pytest.fixture
def mock_cluster():
    mc = MockCluster(brokers=3).start()
    yield mc
    mc.stop()


_topic_seq = itertools.count()


@pytest.fixture
def topic(request):
    """Factory for fresh, uniquely named topics (default: 6 partitions on `kafka`)."""
    base = re.sub(r"[^a-zA-Z0-9._-]", "_", request.node.name)[:150]

    def make(partitions: int = 6, *, cluster=None, replication_factor: int | None = None,
             configs: dict | None = None, name: str | None = None) -> str:
        target = cluster if cluster is not None else request.getfixturevalue("kafka")
        name = name or f"{base}-{next(_topic_seq)}-{os.getpid()}"
        kwargs = {} if replication_factor is None else {"replication_factor": replication_factor}
        return target.create_topic(name, partitions, configs=configs, **kwargs)

    return make


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or rep.when not in ("setup", "call"):
        return
    for name in BROKER_FIXTURES:
        broker = getattr(item, "funcargs", {}).get(name)
        if broker is not None and hasattr(broker, "log_tail"):
            try:
                tail = broker.log_tail(40)
            except Exception as e:  # noqa: BLE001 - a report must not fail
                tail = f"(log tail unavailable: {e!r})"
            if tail:
                rep.sections.append((f"{name} log tail", tail))


@pytest.fixture
def often_switch():
    """Threads switch every microsecond on a GIL build (many more interleavings); for thread
    tests: ``pytestmark = pytest.mark.usefixtures("often_switch")``."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)
