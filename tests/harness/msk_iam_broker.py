"""A Kafka broker whose SASL_SSL listener also speaks AWS_MSK_IAM and VERIFIES the signature.

:class:`MskIamKafkaCluster` is a :class:`~tests.harness.security.SecureKafkaCluster` whose
SASL_SSL listener enables AWS_MSK_IAM besides its other mechanisms. The server side is a small
Java plugin (tests/harness/java/pyprod/test/msk): ``MskIamLoginModule`` registers a SaslServer
that recomputes the SigV4 signature of the client's presigned ``kafka-cluster:Connect`` with the
one identity of its JAAS options (:data:`ACCESS_KEY`/:data:`SECRET_KEY`/:data:`SESSION_TOKEN`,
:data:`REGION`, host 127.0.0.1) and checks version, action, host, scope, date/expiry and token;
a refusal reaches the client as SASL_AUTHENTICATION_FAILED with its reason. The plugin is
compiled with ``javac`` against the broker's jars the first time (cached beside them, rebuilt
when a source changes) and appended to the broker's classpath. Test credentials only.
"""
from __future__ import annotations

import glob
import hashlib
import os
import subprocess

from pyprod.local_broker.jars import KafkaLibsUnavailable, ensure_kafka_libs, maven_libs
from tests.harness.security import SecureKafkaCluster

ACCESS_KEY = "AKIAPYPRODTEST000001"
SECRET_KEY = "pyprodTestSecret/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEPyprod+test/session=token"
REGION = "eu-west-3"
MECHANISM = "AWS_MSK_IAM"
LOGIN_MODULE = "pyprod.test.msk.MskIamLoginModule"
_SOURCES = os.path.join(os.path.dirname(__file__), "java", "pyprod", "test", "msk")


def verifier_classes(version: str | None = None) -> str:
    """The compiled plugin's class folder for Kafka ``version`` (javac once, then cached)."""
    libs = ensure_kafka_libs(version)
    sources = sorted(glob.glob(os.path.join(_SOURCES, "*.java")))
    digest = hashlib.sha256()
    for path in sources:
        with open(path, "rb") as f:
            digest.update(f.read())

    def compile_into(tmp: str) -> None:
        res = subprocess.run(["javac", "-nowarn", "-d", tmp, "-cp", os.path.join(libs, "*"),
                              *sources], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise KafkaLibsUnavailable("javac could not build the AWS_MSK_IAM verifier:\n"
                                       + (res.stdout + res.stderr)[-3000:])

    cache = os.path.join(os.path.dirname(libs), "msk-iam-verifier")  # beside the broker's jars
    return maven_libs(cache, digest.hexdigest() + "\n", compile_into, "the AWS_MSK_IAM verifier")


class MskIamKafkaCluster(SecureKafkaCluster):
    """SecureKafkaCluster (no Kerberos) whose SASL_SSL listener verifies AWS_MSK_IAM for one
    identity; ``session_token=None`` accepts keys without a token."""

    def __init__(self, *, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY,
                 session_token: str | None = SESSION_TOKEN, region: str = REGION, **kwargs):
        kwargs.setdefault("kerberos", False)
        super().__init__(**kwargs)
        self.identity = {"accessKey": access_key, "secretKey": secret_key, "region": region,
                         "host": "127.0.0.1"}
        if session_token:
            self.identity["sessionToken"] = session_token
        self._classes: str | None = None

    def start(self, timeout: float = 90.0) -> "MskIamKafkaCluster":
        self._classes = self._classes or verifier_classes(self.version)
        return super().start(timeout)

    def _security_props(self) -> dict:
        props = super()._security_props()
        key = "listener.name.sasl_ssl.sasl.enabled.mechanisms"
        props[key] += "," + MECHANISM
        options = " ".join(f'{k}="{v}"' for k, v in self.identity.items())
        props[f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config"] = \
            f"{LOGIN_MODULE} required {options};"
        return props

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        argv = super()._java(i, main, *args)
        cp = argv.index("-cp") + 1
        argv[cp] += os.pathsep + self._classes
        return argv

    def client_config(self, name: str, mechanism: str | None = None, user: str = "alice") -> dict:
        """As SecureKafkaCluster's; ``mechanism="AWS_MSK_IAM"`` gives no credentials (they come
        from the AWS environment, as on Amazon MSK)."""
        if mechanism != MECHANISM:
            return super().client_config(name, mechanism, user)
        cfg = super().client_config(name, "PLAIN", user)
        del cfg["sasl_plain_username"], cfg["sasl_plain_password"]
        cfg["sasl_mechanism"] = MECHANISM
        return cfg
