"""SASL mechanisms as pure functions: SCRAM against RFC 7677's example exchange and its
failure cases, PLAIN and OAUTHBEARER message layouts. (The real broker tests are in
tests/security.)"""
import pytest

from pyprod import config as configuration
from pyprod.errors import KafkaConfigurationError, SaslAuthenticationFailedError
from pyprod.sasl import check_config
from pyprod.sasl.oauthbearer import OAuthBearerSaslClient
from pyprod.sasl.plain import PlainSaslClient
from pyprod.sasl.scram import ScramSaslClient

NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==," \
               b"i=4096"
CLIENT_FINAL = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0," \
               b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_client():
    return ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)


def test_scram_sha256_rfc7677_exchange():
    c = rfc7677_client()
    assert c.first() == b"n,,n=user,r=" + NONCE.encode()
    assert c.evaluate(SERVER_FIRST) == CLIENT_FINAL
    assert c.evaluate(SERVER_FINAL) is None


@pytest.mark.parametrize("server_first", [
    SERVER_FIRST.replace(b"r=rOpr", b"r=XXpr"),           # nonce not extending ours
    SERVER_FIRST.replace(b"i=4096", b"i=1000"),            # too few iterations
    SERVER_FIRST.replace(b"s=W22Z", b"s=!!!!"),            # salt not base64
    b"e=unknown-user", b"\xff\xfe", b"garbage",
])
def test_scram_refuses_bad_server_first(server_first):
    with pytest.raises(SaslAuthenticationFailedError):
        rfc7677_client().evaluate(server_first)


@pytest.mark.parametrize("server_final", [
    SERVER_FINAL[:-5] + b"AAAA=", b"v=", b"e=invalid-proof", b"v=!!"])
def test_scram_refuses_a_broker_that_does_not_know_the_password(server_final):
    c = rfc7677_client()
    c.evaluate(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        c.evaluate(server_final)
    assert "pencil" not in str(info.value)


def test_scram_escapes_user_names():
    c = ScramSaslClient("SCRAM-SHA-512", "a=b,c", "p", nonce="n")
    assert c.first() == b"n,,n=a=3Db=2Cc,r=n"


def test_plain_message():
    c = PlainSaslClient("alice", "alice-secret")
    assert c.first() == b"\0alice\0alice-secret"
    assert c.evaluate(b"") is None
    assert "alice-secret" not in repr(c)


class Provider:
    def token(self):
        return "tok.en."

    def extensions(self):
        return {"traceId": "123"}


def test_oauthbearer_message_and_error_challenge():
    c = OAuthBearerSaslClient(Provider())
    assert c.first() == b"n,,\x01auth=Bearer tok.en.\x01traceId=123\x01\x01"
    assert c.evaluate(b"") is None
    assert c.evaluate(b'{"status":"invalid_token"}') == b"\x01"  # RFC 7628 3.2.3
    assert c.error == "invalid_token"


def test_oauthbearer_provider_failure_is_typed_and_quiet():
    class Broken:
        def token(self):
            raise RuntimeError("secret-token-xyz")
    with pytest.raises(SaslAuthenticationFailedError) as info:
        OAuthBearerSaslClient(Broken()).first()
    assert "secret-token-xyz" not in str(info.value)


@pytest.mark.parametrize("overrides", [
    {"sasl_mechanism": None}, {"sasl_mechanism": "DIGEST-MD5"},
    {"sasl_mechanism": "PLAIN", "sasl_plain_username": None},
    {"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_password": ""},
    {"sasl_mechanism": "OAUTHBEARER"},
    {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": object()},
])
def test_sasl_config_checked_at_construction(overrides):
    config = dict(configuration.DEFAULTS, sasl_plain_username="u", sasl_plain_password="p")
    config.update(overrides)
    with pytest.raises(KafkaConfigurationError):
        check_config(config)
