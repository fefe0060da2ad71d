"""The broker matrix (issue 43): one node of each supported Apache Kafka line, started from
Maven Central's jars, with a SCRAM-SHA-256 user on a SASL_PLAINTEXT listener, and SSL and
SASL_SSL (SCRAM-SHA-256) listeners with a throwaway CA (tests.harness.certificates).

:data:`VERSIONS` (newest first) says per version whether it runs KRaft (combined mode,
``--add-scram`` at format time) or ZooKeeper (:class:`~tests.harness.zk_kafka.ZkKafkaCluster`,
the user put into ZooKeeper), and the JVM it runs on (see docs/brokers.md).
``start_broker(version)`` returns a started cluster with ``bootstrap_servers``,
``sasl_bootstrap``, ``scram_config()``, ``ssl_config()``, ``sasl_ssl_config()``,
``create_topic()`` and ``stop()``.
``selected_versions()`` reads ``PYPROD_BROKER_VERSIONS`` (comma list, or ``all``; default
:data:`DEFAULT_VERSIONS`: the newest and the oldest supported, and 0.10.2.2, below what pyprod
supports: ``refused``, only pyprod's refusal is tested there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import NamedTuple

from pyprod.local_broker.jars import version_tuple
from pyprod.local_broker.processes import free_ports

from .certificates import make_certificates
from .kafka_cluster import KafkaCluster
from .zk_kafka import ZkKafkaCluster

__all__ = ["BrokerVersion", "VERSIONS", "SUPPORTED", "DEFAULT_VERSIONS", "SCRAM_USERS",
           "FEATURE_SINCE", "selected_versions", "supports", "start_broker", "KraftScramCluster"]


class BrokerVersion(NamedTuple):
    version: str
    zookeeper: bool  # False: KRaft combined mode
    java: str | None = None  # a java executable; None: JAVA_HOME's or the one on PATH
    refused: bool = False  # below what pyprod supports: only its refusal is tested


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
    BrokerVersion("0.10.2.2", True, refused=True),  # Produce v2 max: no record batches
]
BY_VERSION = {v.version: v for v in VERSIONS}
SUPPORTED = [v.version for v in VERSIONS if not v.refused]
# the newest and the oldest supported, and the refused one (a quick refusal check)
DEFAULT_VERSIONS = (SUPPORTED[0], SUPPORTED[-1], *(v.version for v in VERSIONS if v.refused))
SCRAM_USERS = {"alice": "alice-secret"}

# feature -> the first broker version that has it
FEATURE_SINCE = {"headers": (0, 11), "idempotence": (0, 11), "transactions": (0, 11),
                 "sasl": (1, 0), "zstd": (2, 1),  # sasl: SaslAuthenticate (pyprod's SASL)
                 # KRaft 4.x formats with transaction.version 2: transactions v2 (KIP-890)
                 "kraft4": (4, 0), "transactions_v2": (4, 0),
                 # KIP-679: InitProducerId authorized by WRITE on any topic (no IDEMPOTENT_WRITE)
                 "idempotent_write_by_topic": (2, 8)}


def supports(version: str, feature: str) -> bool:
    return version_tuple(version) >= FEATURE_SINCE[feature]


def selected_versions(refused: bool | None = False) -> list[str]:
    """The versions to test: ``PYPROD_BROKER_VERSIONS`` (comma list or ``all``) or
    :data:`DEFAULT_VERSIONS`; ``refused``: only the supported (False), only the refused (True)
    or both (None). An unknown version is an error, not a silent no-op."""
    return [v for v in _selected() if refused is None or BY_VERSION[v].refused is refused]


def _selected() -> list[str]:
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


class _Tls:
    """SSL and SASL_SSL listeners (``tls_ports``), the broker's keystore from certificates made
    at start(); the clients trust the CA (``ssl_cafile``) and check the host name."""
    tls_ports: dict = {}
    certs = None

    def _tls_listeners(self) -> str:
        return "".join(f",{name}://127.0.0.1:{port}" for name, port in self.tls_ports.items())

    def _tls_props(self) -> dict:
        c, pw = self.certs, self.certs.broker_store_password
        return {"ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": c.broker_keystores["server"],
                "ssl.keystore.password": pw, "ssl.key.password": pw,
                "ssl.truststore.type": "PKCS12", "ssl.truststore.location": c.truststore_p12,
                "ssl.truststore.password": pw}

    def _draw_ports(self, n: int) -> list[int]:
        """``n`` free ports, the last two the SSL and SASL_SSL ones; certificates made once."""
        if self.certs is None:
            self.certs = make_certificates(tempfile.mkdtemp(prefix="pyprod-matrix-certs-"))
        ports = free_ports(n + 2)
        self.tls_ports = {"SSL": ports[-2], "SASL_SSL": ports[-1]}
        return ports[:-2]

    def ssl_config(self) -> dict:
        return {"bootstrap_servers": f"127.0.0.1:{self.tls_ports['SSL']}",
                "security_protocol": "SSL", "ssl_cafile": self.certs.ca_file}

    def sasl_ssl_config(self, user: str = "alice") -> dict:
        return dict(self.scram_config(user), security_protocol="SASL_SSL",
                    bootstrap_servers=f"127.0.0.1:{self.tls_ports['SASL_SSL']}",
                    ssl_cafile=self.certs.ca_file)

    def stop(self, *args, **kwargs) -> None:
        super().stop(*args, **kwargs)
        if self.certs is not None and not kwargs.get("_keep_dir"):
            with contextlib.suppress(OSError):
                shutil.rmtree(self.certs.directory)
            self.certs = None


class _Java:
    java: str | None = None

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        argv = super()._java(i, main, *args)
        if self.java:
            argv[0] = self.java
        return argv


class KraftScramCluster(_Tls, _Java, _Scram, KafkaCluster):
    """One KRaft node (3.5+: ``kafka-storage format --add-scram``) with SASL_PLAINTEXT and
    SASL_SSL listeners taking SCRAM-SHA-256 for :data:`SCRAM_USERS`, and an SSL listener."""

    def __init__(self, version: str, *, java: str | None = None,
                 features: dict | None = None, **kwargs):
        super().__init__(1, version=version, **kwargs)
        self.java = java
        self.features = dict(features or {})  # format --feature name=level (4.0+)

    @property
    def format_args(self) -> tuple:
        args = [a for f in self.features.items() for a in ("--feature", "%s=%s" % f)]
        for name, pw in SCRAM_USERS.items():
            args += ["--add-scram", f"SCRAM-SHA-256=[name={name},password={pw}]"]
        return tuple(args)

    def _props(self, i: int) -> dict:
        props = super()._props(i)
        extra = f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}" + self._tls_listeners()
        props["listeners"] += extra
        props["advertised.listeners"] += extra
        props["listener.security.protocol.map"] += "".join(
            f",{n}:{n}" for n in ("SASL_PLAINTEXT", *self.tls_ports))
        for name in ("sasl_plaintext", "sasl_ssl"):
            props[f"listener.name.{name}.sasl.enabled.mechanisms"] = "SCRAM-SHA-256"
            props[f"listener.name.{name}.scram-sha-256.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        props.update(self._tls_props())
        props.update(self.broker_props)
        return props

    def start(self, timeout: float = 120.0) -> "KraftScramCluster":
        if not self._ports:  # one draw, so the SASL port collides with no other
            ports = self._draw_ports(3)
            self._ports, self._ctl_ports, self.sasl_port = ports[:1], ports[1:2], ports[2]
        return super().start(timeout)


class ZkScramCluster(_Tls, _Scram, ZkKafkaCluster):
    """A ZooKeeper-mode broker with :class:`ZkKafkaCluster`'s SASL_PLAINTEXT listener plus SSL
    and SASL_SSL (its listener names are the protocols: 0.11 needs no protocol map)."""

    def __init__(self, version: str, *, java: str | None = None, **kwargs):
        super().__init__(version, scram_users=SCRAM_USERS, java=java, **kwargs)

    def _props(self, i: int) -> dict:
        props = super()._props(i)
        props["listeners"] += self._tls_listeners()
        props["advertised.listeners"] += self._tls_listeners()
        props.update(self._tls_props())
        props.update(self.broker_props)
        return props

    def start(self, timeout: float = 120.0) -> "ZkScramCluster":
        if not self._ports:  # as ZkKafkaCluster.start's draw, plus the two TLS ports
            ports = self._draw_ports(4)
            self._ports, self._ctl_ports = ports[:1], ports[1:2]
            self.zk_port, self.sasl_port = ports[2], ports[3]
        return super().start(timeout)


def start_broker(version: str, timeout: float = 180.0, **kwargs):
    """A started one-node broker of ``version`` (one of :data:`VERSIONS`) with SCRAM;
    ``kwargs``: the cluster class's (KRaft: ``features``)."""
    spec = BY_VERSION[version]
    cls = ZkScramCluster if spec.zookeeper else KraftScramCluster
    return cls(version, java=spec.java, **kwargs).start(timeout)
