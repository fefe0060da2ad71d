"""Every refused TLS handshake or SASL exchange fails fast with a typed error in kafka-python's
names (from the constructor, or from send() when the bootstrap is skipped), backs off instead of
retrying in a storm, and no secret reaches a log line, an exception, a repr or the metrics."""
import logging
import ssl
import traceback

import pytest

from pyprod import KafkaProducer
from pyprod import errors
from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider

SECRET = "hunter2-not-the-password"


def make(cluster, listener, mechanism=None, **overrides):
    config = cluster.client_config(listener, mechanism=mechanism)
    config.update(overrides)
    return KafkaProducer(**config)


def refused(cluster, listener, mechanism=None, **overrides):
    """The error the constructor raises (it must raise one)."""
    with pytest.raises(errors.KafkaError) as info:
        make(cluster, listener, mechanism, bootstrap_timeout_ms=60_000, **overrides).close()
    return info.value


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_wrong_password(kafka_secure, listener, mechanism):
    err = refused(kafka_secure, listener, mechanism, sasl_plain_password=SECRET)
    assert isinstance(err, errors.SaslAuthenticationFailedError)
    assert isinstance(err, errors.AuthenticationFailedError)
    assert SECRET not in repr(err)


def test_unknown_mechanism_fails_at_construction():
    with pytest.raises(errors.KafkaConfigurationError, match="sasl_mechanism"):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="DIGEST-MD5", sasl_plain_username="u",
                      sasl_plain_password=SECRET)


def test_mechanism_not_enabled(kafka_secure):
    err = refused(kafka_secure, "PLAINONLY", "SCRAM-SHA-256")
    assert isinstance(err, errors.UnsupportedSaslMechanismError)
    assert "PLAIN" in str(err)


@pytest.mark.parametrize("listener,overrides,reason", [
    ("SSL", "untrusted", "certificate"),
    ("WRONGHOST", None, "mismatch"),
    ("EXPIRED", None, "certificate has expired"),
    ("REVOKED", "crl", "certificate revoked"),
])
def test_refused_certificates(kafka_secure, listener, overrides, reason):
    certs = kafka_secure.certs
    overrides = {"untrusted": {"ssl_cafile": certs.untrusted_ca_file},
                 "crl": {"ssl_crlfile": certs.crl_file}}.get(overrides, {})
    err = refused(kafka_secure, listener, **overrides)
    assert isinstance(err, errors.SslAuthenticationError)
    assert isinstance(err, errors.KafkaConnectionError)  # what kafka-python code catches
    assert isinstance(err.ssl_error, ssl.SSLCertVerificationError)
    assert err.__cause__ is err.ssl_error
    assert reason in str(err)


def test_host_name_check_can_be_turned_off(kafka_secure):
    make(kafka_secure, "WRONGHOST", ssl_check_hostname=False).close()


def test_revoked_certificate_passes_without_crl(kafka_secure):
    make(kafka_secure, "REVOKED").close()


def test_mtls_without_client_certificate(kafka_secure):
    err = refused(kafka_secure, "MTLS", ssl_certfile=None, ssl_keyfile=None)
    assert isinstance(err, errors.SslAuthenticationError)


def test_expired_oauth_token(kafka_secure):
    provider = UnsecuredTokenProvider("alice", lifetime_ms=-60_000)
    err = refused(kafka_secure, "SASL_SSL", "OAUTHBEARER", sasl_oauth_token_provider=provider)
    assert isinstance(err, errors.SaslAuthenticationFailedError)


def test_send_raises_when_bootstrap_is_skipped(kafka_secure):
    """api_version set: no eager bootstrap, so send()'s metadata wait raises the error."""
    producer = make(kafka_secure, "SASL_SSL", "SCRAM-SHA-512", sasl_plain_password=SECRET,
                    api_version=(4, 0), max_block_ms=30_000)
    try:
        with pytest.raises(errors.SaslAuthenticationFailedError):
            producer.send("any-topic", b"x")
    finally:
        producer.close()


def test_backs_off_after_refusal(kafka_secure, caplog):
    """No retry storm: reconnects to a refusing broker back off exponentially."""
    import time
    producer = make(kafka_secure, "SASL_PLAINTEXT", "PLAIN", sasl_plain_password=SECRET,
                    api_version=(4, 0), reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    with caplog.at_level(logging.DEBUG, logger="pyprod"):
        try:
            with pytest.raises(errors.SaslAuthenticationFailedError):
                producer.send("any-topic", b"x")
            time.sleep(3)
        finally:
            producer.close()
    attempts = [r for r in caplog.records if r.getMessage().startswith("Connecting to node")]
    assert 1 <= len(attempts) <= 15, len(attempts)


def _everything_shown(producer_or_none, err, caplog, capsys):
    shown = [caplog.text, "".join(traceback.format_exception(err)), repr(err), str(err)]
    shown += capsys.readouterr()
    if producer_or_none is not None:
        shown += [repr(producer_or_none), repr(producer_or_none.config),
                  str(producer_or_none.config), repr(producer_or_none.metrics())]
    return "\n".join(shown)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_no_secret_in_logs_errors_repr_or_metrics(kafka_secure, topic, caplog, capsys,
                                                   mechanism):
    from pyprod import config as configuration
    secret_token = None
    overrides = {"sasl_plain_password": SECRET}
    if mechanism == "OAUTHBEARER":
        provider = UnsecuredTokenProvider("alice", lifetime_ms=-60_000)
        secret_token = provider.token()
        overrides = {"sasl_oauth_token_provider": provider}
    with caplog.at_level(logging.DEBUG):
        err = refused(kafka_secure, "SASL_SSL", mechanism, **overrides)
        good = make(kafka_secure, "SASL_SSL", "PLAIN")
        good.send(topic(1, cluster=kafka_secure), b"x").get(timeout=30)
        shown = _everything_shown(good, err, caplog, capsys)
        good.close()
    password = kafka_secure.client_config("SASL_SSL", mechanism="PLAIN")["sasl_plain_password"]
    for secret in (SECRET, password, secret_token):
        if secret:
            assert secret not in shown
    built = configuration.build(sasl_plain_password=SECRET, ssl_password=SECRET)
    assert SECRET not in repr(built) and SECRET not in str(built)


def test_no_key_passphrase_in_errors(kafka_secure, caplog):
    certs = kafka_secure.certs
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(errors.KafkaConfigurationError) as info:
            make(kafka_secure, "MTLS", ssl_keyfile=certs.client_key_encrypted,
                 ssl_password=SECRET)
    text = caplog.text + "".join(traceback.format_exception(info.value))
    assert SECRET not in text and certs.client_key_password not in text
