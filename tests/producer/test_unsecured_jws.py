"""UnsecuredTokenProvider: the tokens Kafka's unsecured OAUTHBEARER validator accepts."""
import base64
import json
import pickle

import pytest

from pyprod.errors import KafkaConfigurationError
from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider


class Clock:
    def __init__(self, now=1_700_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def _part(text):
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def decode(token):
    header, claims, signature = token.split(".")
    return _part(header), _part(claims), signature


def broker_accepts(token, now, principal_claim="sub"):
    """The checks of Kafka's OAuthBearerUnsecuredJws + OAuthBearerUnsecuredValidatorCallbackHandler
    (no clock skew, no required scope)."""
    assert ".." not in token and token.count(".") == 2
    header, claims, signature = decode(token)
    if header.get("alg") != "none" or signature != "":
        return False
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        return False
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, (int, float)) or exp * 1000 <= now * 1000:
        return False
    if iat is not None and (not isinstance(iat, (int, float)) or iat > now or iat >= exp):
        return False
    return True


def test_token_shape_and_default_lifetime():
    clock = Clock()
    p = UnsecuredTokenProvider("alice", clock=clock)
    token = p.token()
    header, claims, sig = decode(token)
    assert header == {"alg": "none"} and sig == ""
    assert token.endswith(".") and "=" not in token
    assert claims == {"sub": "alice", "iat": clock.now, "exp": clock.now + 3600}
    assert broker_accepts(token, clock.now)
    assert p.extensions() == {}


def test_token_is_reused_then_refreshed_at_80_percent():
    clock = Clock()
    p = UnsecuredTokenProvider("alice", lifetime_seconds=100, clock=clock)
    first = p.token()
    clock.now += 79
    assert p.token() == first
    clock.now += 1
    second = p.token()
    assert second != first
    assert decode(second)[1]["exp"] == clock.now + 100


def test_expired_tokens_for_tests():
    clock = Clock()
    for p in (UnsecuredTokenProvider("alice", lifetime_ms=-5000, clock=clock),
              UnsecuredTokenProvider("alice", exp=clock.now - 5, clock=clock)):
        token = p.token()
        claims = decode(token)[1]
        assert claims["exp"] == clock.now - 5 and claims["iat"] < claims["exp"]
        assert not broker_accepts(token, clock.now)
    fixed = UnsecuredTokenProvider("alice", exp=clock.now + 10, clock=clock)
    token = fixed.token()
    clock.now += 9.5
    assert fixed.token() == token  # a fixed exp is never remade
    assert broker_accepts(token, clock.now)


def test_from_jaas_options():
    clock = Clock()
    p = UnsecuredTokenProvider.from_options({
        "unsecuredLoginStringClaim_sub": "svc",
        "unsecuredLoginLifetimeSeconds": "60",
        "unsecuredLoginNumberClaim_level": "3",
        "unsecuredLoginNumberClaim_ratio": "0.5",
        "unsecuredLoginListClaim_scope": "|read|write",
        "unsecuredLoginExtension_traceId": "123",
        "unsecuredValidatorRequiredScope": "ignored",  # a broker option: ignored, like Kafka
    }, clock=clock)
    claims = decode(p.token())[1]
    assert claims == {"sub": "svc", "iat": clock.now, "exp": clock.now + 60, "level": 3,
                      "ratio": 0.5, "scope": ["read", "write"]}
    assert p.extensions() == {"traceId": "123"}
    assert broker_accepts(p.token(), clock.now)


def test_custom_principal_claim_name():
    clock = Clock()
    p = UnsecuredTokenProvider.from_options({
        "unsecuredLoginPrincipalClaimName": "user",
        "unsecuredLoginStringClaim_user": "bob"}, clock=clock)
    assert decode(p.token())[1]["user"] == "bob"
    assert broker_accepts(p.token(), clock.now, principal_claim="user")


@pytest.mark.parametrize("options,needle", [
    ({}, "principal"),
    ({"unsecuredLoginStringClaim_sub": "  "}, "principal"),
    ({"unsecuredLoginNumberClaim_sub": "1"}, "principal"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginStringClaim_exp": "1"}, "'exp'"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_iat": "1"}, "'iat'"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "1h"}, "Lifetime"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "x"}, "_n"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetime": "5"}, "Lifetime"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_auth": "x"}, "'auth'"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_a1": "x"}, "'a1'"),
])
def test_bad_options(options, needle):
    with pytest.raises(KafkaConfigurationError) as e:
        UnsecuredTokenProvider.from_options(options)
    assert needle in str(e.value)


def test_bad_extension_value_is_not_echoed():
    secret = "s3cr\x00t-extension"
    with pytest.raises(KafkaConfigurationError) as e:
        UnsecuredTokenProvider("alice", extensions={"key": secret})
    assert "s3cr" not in str(e.value) and "'key'" in str(e.value)


def test_repr_hides_token_and_extension_values():
    p = UnsecuredTokenProvider("alice", extensions={"apiKey": "hunter2-value"})
    token = p.token()
    text = repr(p) + str(p)
    assert token not in text and token.split(".")[1] not in text
    assert "hunter2-value" not in text
    assert "alice" in text and "apiKey" in text


def test_pickles_equal_and_works_after():
    clock = Clock()
    p = UnsecuredTokenProvider("alice", extensions={"traceId": "1"}, clock=clock)
    p.token()  # a cached token must not change the pickle (Spark's producer cache keys on it)
    fresh = UnsecuredTokenProvider("alice", extensions={"traceId": "1"}, clock=clock)
    assert pickle.dumps(p) == pickle.dumps(fresh)
    copy = pickle.loads(pickle.dumps(p))
    assert copy == p and hash(copy) == hash(p)
    assert copy != UnsecuredTokenProvider("bob", clock=clock)
    assert broker_accepts(copy.token(), clock.now)


def test_kafka_python_builds_the_same_initial_response():
    """kafka-python's OAUTHBEARER client message carries our token and extensions."""
    from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

    ours = UnsecuredTokenProvider("alice", extensions={"traceId": "7"})

    class Adapter(AbstractTokenProvider):
        def token(self):
            return ours.token()

        def extensions(self):
            return ours.extensions()

    msg = SaslMechanismOAuth(sasl_oauth_token_provider=Adapter()).auth_bytes()
    assert msg == ("n,,\x01auth=Bearer %s\x01traceId=7\x01\x01" % ours.token()).encode()
