"""OAUTHBEARER with an OIDC token endpoint (KIP-768), end to end: pyprod's OidcTokenProvider
fetches RS256 JWTs from tests/harness/oidc_provider.py (client-credentials grant) and Apache
Kafka's own OAuthBearerValidatorCallbackHandler checks them against the provider's JWKS and the
expected audience. Records are read back by kafka-python over the PLAINTEXT listener."""
import logging
import threading

import pytest

from pyprod import KafkaProducer
from pyprod.errors import (KafkaConfigurationError, KafkaTimeoutError,
                           SaslAuthenticationFailedError)
from pyprod.sasl.oidc_token_provider import OidcTokenProvider
from tests.harness.oidc_provider import TEST_CLIENT_SECRET as SECRET
from tests.harness.readback import read_all


@pytest.fixture
def make_provider(idp):
    made = []

    def make(**kw):
        kw.setdefault("timeout_s", 10)
        p = OidcTokenProvider(kw.pop("url", idp.token_url), kw.pop("client_id", "pyprod"),
                              kw.pop("secret", SECRET), kw.pop("scope", "kafka"), **kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


def _config(cluster, listener, provider):
    cfg = cluster.client_config(listener, mechanism="OAUTHBEARER")
    cfg["sasl_oauth_token_provider"] = provider
    return cfg


def test_produce_and_read_back(oidc_kafka, topic, make_provider, caplog):
    caplog.set_level(logging.DEBUG)
    provider = make_provider()
    name = topic(3, cluster=oidc_kafka)
    with KafkaProducer(**_config(oidc_kafka, "SASL_PLAINTEXT", provider)) as producer:
        for i in range(1000):
            producer.send(name, b"v%d" % i, key=b"k%d" % (i % 7))
        producer.flush()
        assert SECRET not in repr(producer) and SECRET not in repr(provider)
    read = read_all(oidc_kafka.bootstrap_servers, name, expected_count=1000)
    assert sorted(r.value for r in read) == sorted(b"v%d" % i for i in range(1000))
    assert SECRET not in caplog.text


def test_reauth_uses_a_new_token(oidc_kafka, idp, topic, make_provider):
    """KIP-368: the REAUTH listener re-authenticates every 10 s; tokens live 12 s and are
    refreshed at ~80 % of that, so every re-authentication must present a fresh token."""
    idp.lifetime_s = 12
    try:
        provider = make_provider(refresh_min_period_s=1, refresh_buffer_s=1)
        name = topic(1, cluster=oidc_kafka)
        first = idp.fetches
        with KafkaProducer(**_config(oidc_kafka, "REAUTH", provider)) as producer:
            n = 0
            while idp.fetches < first + 3:  # three refreshes: past two token lifetimes
                producer.send(name, b"r%d" % n).get(timeout=30)
                n += 1
                threading.Event().wait(0.2)
        read = read_all(oidc_kafka.bootstrap_servers, name, expected_count=n)
        assert len(read) == n
    finally:
        idp.lifetime_s = 3600


def test_refresh_runs_off_the_sender_thread(oidc_kafka, idp, topic, make_provider):
    """The token endpoint answers in 3 s while sends continue on the cached token."""
    provider = make_provider(refresh_min_period_s=0, refresh_buffer_s=0,
                             refresh_window_factor=0.0, refresh_window_jitter=0.0,
                             retry_backoff_s=0.1)
    name = topic(1, cluster=oidc_kafka)
    idp.delay_s = 3
    try:
        start = idp.fetches
        with KafkaProducer(**_config(oidc_kafka, "SASL_PLAINTEXT", provider)) as producer:
            sent = 0
            while idp.fetches < start + 1:  # sends complete while the slow fetch is in flight
                producer.send(name, b"s").get(timeout=30)
                sent += 1
        assert sent > 1
    finally:
        idp.delay_s = 0


def test_bad_secret_is_typed_without_the_secret(make_provider, caplog):
    with pytest.raises(SaslAuthenticationFailedError) as e:
        make_provider(secret="wrong-" + SECRET)
    assert "invalid_client" in str(e.value) and SECRET not in str(e.value)
    assert SECRET not in caplog.text


def test_bad_scope_and_bad_url(make_provider):
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_scope"):
        make_provider(scope="admin")
    with pytest.raises(KafkaConfigurationError):
        make_provider(url="ftp://127.0.0.1/token")


def test_unreachable_endpoint_times_out_typed(make_provider):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
    port = s.getsockname()[1]
    try:
        with pytest.raises(KafkaTimeoutError) as e:
            make_provider(url="http://127.0.0.1:%d/token" % port, timeout_s=2)
        assert SECRET not in str(e.value)
    finally:
        s.close()


def test_wrong_audience_is_refused_by_the_broker(oidc_kafka, idp, topic, make_provider):
    idp.audience = "not-kafka"
    try:
        provider = make_provider()
    finally:
        idp.audience = "kafka"
    name = topic(1, cluster=oidc_kafka)
    with pytest.raises(SaslAuthenticationFailedError):
        with KafkaProducer(max_block_ms=20000,
                           **_config(oidc_kafka, "SASL_PLAINTEXT", provider)) as producer:
            producer.send(name, b"x").get(timeout=30)


def test_expired_token_and_failed_refresh(idp, make_provider, caplog):
    """A refresh failure keeps the old token while valid, logs without the secret, then the
    expired token gives a typed error."""
    idp.lifetime_s = 3
    try:
        provider = make_provider(refresh_min_period_s=0, refresh_buffer_s=0,
                                 retry_backoff_s=0.2)
        token = provider.token()
        idp.fail_status = 503
        assert provider.token() == token   # still valid
        done = threading.Event()
        while not done.wait(0.2):
            try:
                provider.token()
            except SaslAuthenticationFailedError as e:
                assert "expired" in str(e) and SECRET not in str(e)
                done.set()
        assert "refresh" in caplog.text and SECRET not in caplog.text
    finally:
        idp.fail_status = None
        idp.lifetime_s = 3600


def test_config_keys_java_names(oidc_kafka, idp, topic, caplog):
    """The sasl.oauthbearer.* keys of Java/librdkafka (from_java_names) build the provider;
    the client secret shows in no repr nor log."""
    from pyprod.config import from_java_names
    caplog.set_level(logging.DEBUG)
    name = topic(1, cluster=oidc_kafka)
    cfg = oidc_kafka.client_config("SASL_PLAINTEXT", mechanism="OAUTHBEARER")
    del cfg["sasl_oauth_token_provider"]
    cfg.update(from_java_names({
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.oauthbearer.client.id": "pyprod", "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-1"}))
    with KafkaProducer(**cfg) as producer:
        producer.send(name, b"by-java-names").get(timeout=30)
        provider = producer.config["sasl_oauth_token_provider"]
        assert provider.extensions() == {"logicalCluster": "lkc-1", "identityPoolId": "pool-1"}
        assert SECRET not in repr(producer.config) and SECRET not in repr(producer)
        refresher = provider._thread
        assert refresher is not None and refresher.is_alive()
    assert not refresher.is_alive()  # the producer's close() stopped the provider it made
    assert [r.value for r in read_all(oidc_kafka.bootstrap_servers, name, expected_count=1)] \
        == [b"by-java-names"]
    assert SECRET not in caplog.text
