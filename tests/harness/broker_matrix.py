"""The broker matrix (issue 43): one node of each supported Apache Kafka line, started from
Maven Central's jars, with a SCRAM-SHA-256 user on a SASL_PLAINTEXT listener.

:data:`VERSIONS` (newest first) says per version whether it runs KRaft (combined mode,
``--add-scram`` at format time) or ZooKeeper (:class:`~tests.harness.zk_kafka.ZkKafkaCluster`,
the user put into ZooKeeper), and the JVM it runs on (see docs/brokers.md).
``start_broker(version)`` returns a started cluster with ``bootstrap_servers``,
``sasl_bootstrap``, ``scram_config()``, ``create_topic()`` and ``stop()``.
``selected_versions()`` reads ``PYPROD_BROKER_VERSIONS`` (comma list, or ``all``; default
:data:`DEFAULT_VERSIONS`: the newest and the oldest supported).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from pyprod.local_broker.jars import version_tuple
from pyprod.local_broker.processes import free_ports

from .kafka_cluster import KafkaCluster
from .zk_kafka import ZkKafkaCluster

__all__ = ["BrokerVersion", "VERSIONS", "DEFAULT_VERSIONS", "SCRAM_USERS", "FEATURE_SINCE",
           "selected_versions", "supports", "start_broker", "KraftScramCluster"]


class BrokerVersion(NamedTuple):
    version: str
    zookeeper: bool  # False: KRaft combined mode
    java: str | None = None  # a java executable; None: JAVA_HOME's or the one on PATH


VERSIONS = [
    BrokerVersion("4.4.0", False),
    BrokerVersion("4.0.2", False),
    BrokerVersion("3.9.2", False),
    BrokerVersion("3.6.2", False),
    BrokerVersion("3.0.2", True),
    BrokerVersion("2.8.2", True),
    BrokerVersion("2.1.1", True),
    BrokerVersion("1.1.1", True),
    BrokerVersion("0.11.0.3", True),
]
BY_VERSION = {v.version: v for v in VERSIONS}
DEFAULT_VERSIONS = (VERSIONS[0].version, VERSIONS[-1].version)
SCRAM_USERS = {"alice": "alice-secret"}

# feature -> the first broker version that has it
FEATURE_SINCE = {"headers": (0, 11), "idempotence": (0, 11), "transactions": (0, 11),
                 "sasl": (1, 0), "zstd": (2, 1)}  # sasl: SaslAuthenticate (pyprod's SASL)


def supports(version: str, feature: str) -> bool:
    return version_tuple(version) >= FEATURE_SINCE[feature]


def selected_versions() -> list[str]:
    """The versions to test: ``PYPROD_BROKER_VERSIONS`` (comma list or ``all``) or the default
    pair. An unknown version is an error, not a silent no-op."""
    raw = os.environ.get("PYPROD_BROKER_VERSIONS", "").strip()
    if not raw:
        return list(DEFAULT_VERSIONS)
    if raw == "all":
        return [v.version for v in VERSIONS]
    wanted = [v.strip() for v in raw.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in BY_VERSION]
    if unknown:
        raise ValueError(f"PYPROD_BROKER_VERSIONS: unknown {unknown}; known {list(BY_VERSION)}")
    return wanted


class _Scram:
    """The SASL_PLAINTEXT listener's address and client settings (kafka-python keys)."""
    sasl_port: int | None = None

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def scram_config(self, user: str = "alice", password: str | None = None) -> dict:
        return {"bootstrap_servers": self.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": user,
                "sasl_plain_password": SCRAM_USERS[user] if password is None else password}


class _Java:
    java: str | None = None

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        argv = super()._java(i, main, *args)
        if self.java:
            argv[0] = self.java
        return argv


class KraftScramCluster(_Java, _Scram, KafkaCluster):
    """One KRaft node (3.5+: ``kafka-storage format --add-scram``) with a SASL_PLAINTEXT
    listener taking SCRAM-SHA-256 for :data:`SCRAM_USERS`."""

    def __init__(self, version: str, *, java: str | None = None, **kwargs):
        super().__init__(1, version=version, **kwargs)
        self.java = java

    @property
    def format_args(self) -> tuple:
        args = []
        for name, pw in SCRAM_USERS.items():
            args += ["--add-scram", f"SCRAM-SHA-256=[name={name},password={pw}]"]
        return tuple(args)

    def _props(self, i: int) -> dict:
        props = super()._props(i)
        extra = f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        props["listeners"] += extra
        props["advertised.listeners"] += extra
        props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        props["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] = "SCRAM-SHA-256"
        props["listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        props.update(self.broker_props)
        return props

    def start(self, timeout: float = 120.0) -> "KraftScramCluster":
        if not self._ports:  # one draw, so the SASL port collides with no other
            ports = free_ports(3)
            self._ports, self._ctl_ports, self.sasl_port = ports[:1], ports[1:2], ports[2]
        return super().start(timeout)


class ZkScramCluster(_Scram, ZkKafkaCluster):
    def __init__(self, version: str, *, java: str | None = None, **kwargs):
        super().__init__(version, scram_users=SCRAM_USERS, java=java, **kwargs)


def start_broker(version: str, timeout: float = 180.0):
    """A started one-node broker of ``version`` (one of :data:`VERSIONS`) with SCRAM."""
    spec = BY_VERSION[version]
    cls = ZkScramCluster if spec.zookeeper else KraftScramCluster
    return cls(version, java=spec.java).start(timeout)
