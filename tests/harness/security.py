"""Secured Kafka listeners for tests: a throwaway CA, certificates and a CRL made at test time,
and one broker with SSL, mTLS and SASL listeners (:class:`SecureKafkaCluster`).

``SecureKafkaCluster()`` (pytest: the session fixture ``kafka_secure``, or
``start_secure_cluster()`` for a private one to restart) is a one-node :class:`KafkaCluster`
whose PLAINTEXT listener (``bootstrap_servers``, ``admin()``, ``create_topic()``) works as
usual, plus these client listeners on 127.0.0.1, each ``cluster.listener(NAME)`` ->
``"127.0.0.1:port"``, ``cluster.protocol(NAME)`` -> its security protocol:

=============== ============== ==========================================================
NAME            protocol       what it checks
=============== ============== ==========================================================
SSL             SSL            server auth; cert SANs IP 127.0.0.1 and DNS localhost
MTLS            SSL            ssl.client.auth=required (client cert signed by the CA)
SASL_PLAINTEXT  SASL_PLAINTEXT PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI
SASL_SSL        SASL_SSL       the same five mechanisms over TLS (server cert as SSL)
PLAINONLY       SASL_PLAINTEXT PLAIN only (SCRAM etc. -> "mechanism not enabled")
REAUTH          SASL_SSL       all five; connections.max.reauth.ms=10000 (KIP-368)
WRONGHOST       SSL            cert for "wrong.host.invalid" only: hostname check fails
EXPIRED         SSL            expired cert: every verifying client fails
REVOKED         SSL            cert revoked by ``certs.crl_file``: fails with ssl_crlfile
=============== ============== ==========================================================

Users (``cluster.users``, the same for PLAIN and both SCRAMs): alice/alice-secret and
bob/bob-secret. OAUTHBEARER: the broker's default unsecured-JWS validator; any token from
pyprod's :class:`~pyprod.sasl.unsecured_jws.UnsecuredTokenProvider` (or librdkafka's
``sasl.oauthbearer.config=principal=alice``) passes; :func:`kafka_python_token_provider` wraps it
for kafka-python. GSSAPI: ``cluster.kdc``
(:class:`tests.harness.kdc.KerberosKDC`, realm PYPROD.TEST), broker principal
``kafka/127.0.0.1@PYPROD.TEST`` (service name "kafka", clients target host 127.0.0.1; a client
targeting kafka/localhost gets a ticket but the broker refuses it: "invalid credentials with
SASL mechanism GSSAPI"). ``cluster.kdc.client_env()`` gives the env a gssapi client needs (the
``kafka_secure`` fixture puts it in os.environ), the client principal is
``cluster.kdc.client_principal`` with keytab ``cluster.kdc.client_keytab``. confluent-kafka's
bundled librdkafka has no GSSAPI; kafka-python with the ``gssapi`` package works.

``cluster.client_config(NAME, mechanism=None, user="alice")`` -> kafka-python style keys
(bootstrap_servers, security_protocol, sasl_*, ssl_cafile; plus ssl_certfile/ssl_keyfile for
MTLS), usable for pyprod's KafkaProducer and readback's ``security=``.

``cluster.certs`` (:class:`Certificates`) holds the file paths: CA (``ca_file``), an untrusted
CA (``untrusted_ca_file``), client cert/key (plain, encrypted with a password, revoked), the CRL,
PKCS12 trust/key stores with passwords and a PEM keystore for Java clients (Spark).
``stop_node(0)``/``start_node(0)`` restart the broker on the same ports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider
from tests.harness.kafka_cluster import KafkaCluster
from pyprod.local_broker.processes import free_ports

from .certificates import Certificates, make_certificates
from .kdc import KerberosKDC

__all__ = ["Certificates", "make_certificates", "kafka_python_token_provider",
           "SecureKafkaCluster", "LISTENERS", "MECHANISMS", "USERS", "REAUTH_MS"]

# ---------------------------------------------------------------------------------------------
# OAUTHBEARER: unsecured JWS tokens, as the broker's default validator accepts

def kafka_python_token_provider(principal: str = "alice", **kwargs):
    """pyprod's UnsecuredTokenProvider as kafka-python wants it: kafka-python insists on its
    own AbstractTokenProvider base class (pyprod takes any object with ``token()``)."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class _Provider(UnsecuredTokenProvider, AbstractTokenProvider):
        pass
    return _Provider(principal, **kwargs)


# ---------------------------------------------------------------------------------------------
# the broker

# listener name -> security protocol
LISTENERS = {
    "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL",
    "PLAINONLY": "SASL_PLAINTEXT", "REAUTH": "SASL_SSL",
    "WRONGHOST": "SSL", "EXPIRED": "SSL", "REVOKED": "SSL",
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
USERS = {"alice": "alice-secret", "bob": "bob-secret"}  # PLAIN and both SCRAMs
REAUTH_MS = 10000
_KEYSTORE = {"WRONGHOST": "wrong_host", "EXPIRED": "expired", "REVOKED": "revoked"}


class SecureKafkaCluster(KafkaCluster):
    """One Kafka broker with the secured listeners of the module doc, besides PLAINTEXT.

    ``kerberos=False`` leaves GSSAPI out (no KDC needed)."""

    def __init__(self, *, kerberos: bool = True, log_dir: str | None = None,
                 broker_props: dict | None = None, version: str | None = None,
                 heap: str | None = None, jvm_opts: list[str] | None = None):
        super().__init__(1, log_dir, broker_props, version=version, heap=heap,
                         jvm_opts=jvm_opts)
        self.kerberos = kerberos
        self.users = dict(USERS)
        self.mechanisms = MECHANISMS if kerberos else MECHANISMS[:-1]
        self.kdc = None
        self.certs: Certificates | None = None
        self.secrets_dir: str | None = None
        self.listener_ports: dict[str, int] = {}
        self._base_jvm_opts = list(self.jvm_opts)

    # -- addresses -------------------------------------------------------------------------------
    def listener(self, name: str) -> str:
        """``"127.0.0.1:port"`` of listener ``name`` (see :data:`LISTENERS`)."""
        if name == "PLAINTEXT":
            return self.bootstrap_servers
        if name not in LISTENERS:
            raise ValueError(f"unknown listener {name!r}; one of {sorted(LISTENERS)}")
        if not self.listener_ports:
            raise RuntimeError("cluster not started")
        return f"127.0.0.1:{self.listener_ports[name]}"

    @staticmethod
    def protocol(name: str) -> str:
        return "PLAINTEXT" if name == "PLAINTEXT" else LISTENERS[name]

    def client_config(self, name: str, mechanism: str | None = None, user: str = "alice") -> dict:
        """kafka-python style settings to reach listener ``name`` as ``user`` (SASL listeners:
        ``mechanism``, default PLAIN; GSSAPI authenticates as ``kdc.client_principal`` and needs
        ``kdc.client_env()`` in os.environ)."""
        proto = self.protocol(name)
        cfg = {"bootstrap_servers": self.listener(name), "security_protocol": proto}
        if "SSL" in proto:
            cfg["ssl_cafile"] = self.certs.ca_file
        if name == "MTLS":
            cfg.update(ssl_certfile=self.certs.client_cert, ssl_keyfile=self.certs.client_key)
        if not proto.startswith("SASL"):
            return cfg
        mechanism = mechanism or "PLAIN"
        cfg["sasl_mechanism"] = mechanism
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            cfg.update(sasl_plain_username=user, sasl_plain_password=self.users[user])
        elif mechanism == "OAUTHBEARER":
            cfg["sasl_oauth_token_provider"] = kafka_python_token_provider(user)
        elif mechanism == "GSSAPI":
            cfg["sasl_kerberos_service_name"] = "kafka"
        else:
            raise ValueError(f"unknown SASL mechanism {mechanism!r}")
        return cfg

    # -- configuration ---------------------------------------------------------------------------
    @property
    def format_args(self) -> tuple:
        args = []
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for name, pw in self.users.items():
                args += ["--add-scram", f"{mech}=[name={name},password={pw}]"]
        return tuple(args)

    def _jaas(self, mechanism: str) -> str:
        if mechanism == "PLAIN":
            users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
            return f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
        if mechanism.startswith("SCRAM"):
            return "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        if mechanism == "OAUTHBEARER":
            return ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                    'required unsecuredLoginStringClaim_sub="kafka";')
        return self.kdc.jaas_login()

    def _security_props(self) -> dict:
        c, pw = self.certs, self.certs.broker_store_password
        props = {
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": c.broker_keystores["server"],
            "ssl.keystore.password": pw, "ssl.key.password": pw,
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": c.truststore_p12,
            "ssl.truststore.password": pw,
            "listener.name.mtls.ssl.client.auth": "required",
            "sasl.kerberos.service.name": "kafka",
            "listener.name.reauth.connections.max.reauth.ms": REAUTH_MS,
        }
        for name, store in _KEYSTORE.items():
            props[f"listener.name.{name.lower()}.ssl.keystore.location"] = \
                c.broker_keystores[store]
        for name, proto in LISTENERS.items():
            if not proto.startswith("SASL"):
                continue
            mechs = ("PLAIN",) if name == "PLAINONLY" else self.mechanisms
            prefix = f"listener.name.{name.lower()}"
            props[f"{prefix}.sasl.enabled.mechanisms"] = ",".join(mechs)
            for m in mechs:
                props[f"{prefix}.{m.lower()}.sasl.jaas.config"] = self._jaas(m)
        return props

    def _props(self, i: int) -> dict:
        props = super()._props(i)
        extra = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.listener_ports.items())
        props["listeners"] += "," + extra
        props["advertised.listeners"] += "," + extra
        props["listener.security.protocol.map"] += "".join(
            f",{n}:{p}" for n, p in LISTENERS.items())
        props.update(self._security_props())
        props.update(self.broker_props)
        return props

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "SecureKafkaCluster":
        try:
            if self.certs is None:
                self.secrets_dir = tempfile.mkdtemp(prefix="pyprod-secrets-")
                self.certs = make_certificates(os.path.join(self.secrets_dir, "certs"))
            if self.kerberos and self.kdc is None:
                self.kdc = KerberosKDC().start()
            self.jvm_opts = self._base_jvm_opts + (self.kdc.jvm_opts() if self.kdc else [])
            if not self._ports:  # one draw, so no listener port collides with another
                ports = free_ports(2 + len(LISTENERS))
                self._ports, self._ctl_ports = ports[:1], ports[1:2]
                self.listener_ports = dict(zip(LISTENERS, ports[2:]))
            return super().start(timeout)
        except BaseException:
            self.stop(timeout=5)
            raise

    def stop(self, timeout: float = 20.0, *, kill: bool = False, _keep_dir: bool = False) -> None:
        """Stop the broker, then the KDC; remove the certificates (a later start() makes new)."""
        super().stop(timeout, kill=kill, _keep_dir=_keep_dir)
        if _keep_dir:
            return
        if self.kdc is not None:
            self.kdc.stop()
            self.kdc = None
        if self.secrets_dir and not os.environ.get("PYPROD_KEEP_KAFKA_LOGS"):
            with contextlib.suppress(OSError):
                shutil.rmtree(self.secrets_dir)
        self.secrets_dir = self.certs = None

    def log_tail(self, n: int = 50, node: int | None = None) -> str:
        tail = super().log_tail(n, node)
        kdc = self.kdc.log_tail(10) if self.kdc is not None else ""
        return tail + (f"\n----- KDC log (last lines) -----\n{kdc}" if kdc else "")

    def __repr__(self) -> str:
        state = ", ".join(f"{n}={p}" for n, p in self.listener_ports.items()) or "not started"
        return f"<SecureKafkaCluster {self.version} PLAINTEXT={self._ports} {state}>"
