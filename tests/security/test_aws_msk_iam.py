"""AWS_MSK_IAM: pyprod's payload is kafka-python's, byte for byte, for fixed credentials and a
frozen clock (kafka-python's own mechanism called directly), and the mechanism's config checks."""
import datetime
import json
import logging
import types

import pytest

from kafka.net.sasl import msk as kafka_msk
from pyprod import KafkaProducer
from pyprod.errors import KafkaConfigurationError
from pyprod.sasl import aws_msk_iam

NOW = 1764367200.0  # 2025-11-28T22:00:00Z
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzE+/=token with spaces"
HOSTS = [("b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com", "us-east-1"),
         ("b-3.prod.x9y8z7.c11.kafka.eu-west-1.amazonaws.com", "eu-west-1"),
         ("boot-abc.c2.kafka-serverless.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
         ("127.0.0.1", "us-west-2")]


def _kafka_python_payload(monkeypatch, host, region, token):
    """kafka-python's AwsMskIamClient.first_message() with its clock frozen at NOW."""
    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.fromtimestamp(NOW, tz)
    monkeypatch.setattr(kafka_msk, "datetime",
                        types.SimpleNamespace(datetime=Frozen, timezone=datetime.timezone))
    return kafka_msk.AwsMskIamClient(host=host, access_key="AKIAIOSFODNN7EXAMPLE",
                                     secret_key=SECRET, region=region,
                                     token=token).first_message()


@pytest.mark.parametrize("token", [None, TOKEN], ids=["keys", "session-token"])
@pytest.mark.parametrize("host,region", HOSTS)
def test_payload_is_kafka_pythons(monkeypatch, host, region, token):
    ours = aws_msk_iam.payload(host, "AKIAIOSFODNN7EXAMPLE", SECRET, region, token, NOW)
    assert ours == _kafka_python_payload(monkeypatch, host, region, token)
    msg = json.loads(ours)
    assert msg["action"] == "kafka-cluster:Connect" and msg["x-amz-date"] == "20251128T220000Z"
    assert ("x-amz-security-token" in msg) == bool(token)


def test_mechanism_uses_botocore_chain(monkeypatch, caplog):
    """Credentials and region from botocore's default chain (the environment here), the clock
    injected: the same bytes as kafka-python's mechanism; no secret in the repr or the logs."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    host = HOSTS[0][0]
    caplog.set_level(logging.DEBUG)
    mech = _mechanism(host)
    ours = mech.first()
    assert mech.evaluate(b'{"version":"2020_10_22","request-id":"x"}') is None
    kp = kafka_msk.SaslMechanismAwsMskIam(host=host, security_protocol="SASL_SSL")
    monkeypatch.setattr(kafka_msk, "datetime", types.SimpleNamespace(
        datetime=type("F", (datetime.datetime,), {"now": classmethod(
            lambda cls, tz=None: datetime.datetime.fromtimestamp(NOW, tz))}),
        timezone=datetime.timezone))
    assert ours == kp.auth_bytes()
    assert SECRET not in repr(mech) and SECRET not in caplog.text and TOKEN not in caplog.text


def _mechanism(host):
    """The mechanism with credentials resolved as a producer does, for ``host``, at NOW."""
    return aws_msk_iam.AwsMskIamSaslClient(host, aws_msk_iam.AwsMskIamCredentials([host]),
                                           clock=lambda: NOW)


def test_region_from_host_when_botocore_has_none(monkeypatch):
    for var in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    for host, region in HOSTS[:3]:
        msg = json.loads(_mechanism(host).first())
        assert "/%s/kafka-cluster/" % region in msg["x-amz-credential"]
    with pytest.raises(KafkaConfigurationError, match="region"):
        aws_msk_iam.AwsMskIamCredentials(["127.0.0.1"])


def test_config_checks():
    """kafka-python's rule: AWS_MSK_IAM needs SASL_SSL (a KafkaConfigurationError at once)."""
    with pytest.raises(KafkaConfigurationError, match="requires SASL_SSL"):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="AWS_MSK_IAM")


def test_missing_botocore_is_a_configuration_error(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_botocore(name, *args, **kwargs):
        if name.startswith("botocore"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_botocore)
    with pytest.raises(KafkaConfigurationError, match="botocore"):
        aws_msk_iam.check_available()


def _aws_env(monkeypatch, token):
    for key, value in (("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
                       ("AWS_SECRET_ACCESS_KEY", SECRET), ("AWS_CONFIG_FILE", "/nonexistent"),
                       ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")):
        monkeypatch.setenv(key, value)
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    else:
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.mark.parametrize("token", [None, TOKEN], ids=["keys", "session-token"])
def test_signature_is_aws_signers(monkeypatch, token):
    """The OAUTHBEARER route: AWS's own signer (aws-msk-iam-sasl-signer-python, botocore's
    SigV4QueryAuth) presigns kafka-cluster:Connect for kafka.<region>.amazonaws.com; pyprod's
    SigV4 of the same request at the token's X-Amz-Date gives the same signature, and pyprod's
    OAUTHBEARER client sends the token as kafka-python's provider returns it."""
    import base64
    import calendar
    import urllib.parse
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    from pyprod.sasl.oauthbearer import OAuthBearerSaslClient
    _aws_env(monkeypatch, token)
    signed, _expiry_ms = MSKAuthTokenProvider.generate_auth_token("eu-west-1")
    url = base64.urlsafe_b64decode(signed + "=" * (-len(signed) % 4)).decode()
    parsed = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    assert query["Action"] == "kafka-cluster:Connect" and query.get("X-Amz-Security-Token") == token
    when = calendar.timegm(datetime.datetime.strptime(query["X-Amz-Date"],
                                                      "%Y%m%dT%H%M%SZ").timetuple())
    ours = json.loads(aws_msk_iam.payload(parsed.hostname, "AKIAIOSFODNN7EXAMPLE", SECRET,
                                          "eu-west-1", token, when))
    assert ours["x-amz-signature"] == query["X-Amz-Signature"]

    class MSKTokenProvider:  # docs/security.md's provider
        def token(self):
            return MSKAuthTokenProvider.generate_auth_token("eu-west-1")[0]
    first = OAuthBearerSaslClient(MSKTokenProvider()).first()
    assert first.startswith(b"n,,\x01auth=Bearer ") and first.endswith(b"\x01\x01")
