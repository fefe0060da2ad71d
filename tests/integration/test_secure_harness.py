"""The secured-listener harness (tests.harness.security, .kdc) checked with clients this
project did not write: confluent-kafka produces, the readback readers (kafka-python and
confluent-kafka) read over the same listener; GSSAPI goes through kafka-python + gssapi
(confluent-kafka's bundled librdkafka has no GSSAPI). Bad certificates are also checked with
the standard library's ssl module, which names the reason; Java reads the PKCS12/PEM stores."""
import os
import socket
import ssl
import struct
import subprocess
import time

import pytest

from pyprod.local_broker.jars import java_executable
from tests.harness.kafka_cluster import java_command
from tests.harness.readback import (Sent, compare, confluent_security, read_all_confluent,
                                     read_all_kafka_python)
from tests.harness.security import LISTENERS, REAUTH_MS

# the reader/checker (no wheel on some interpreters: cp313t; the matrix lists such skips)
confluent_kafka = pytest.importorskip("confluent_kafka")
KafkaError = confluent_kafka.KafkaError
Producer = confluent_kafka.Producer

SASL_MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CASES = [("SSL", None), ("MTLS", None)] + [
    (lst, m) for lst in ("SASL_PLAINTEXT", "SASL_SSL", "REAUTH") for m in SASL_MECHS]


def records(tag, n=5):
    return [Sent(b"k%d" % (i % 2), b"%s-%d" % (tag.encode(), i), [("i", b"%d" % i)])
            for i in range(n)]


def confluent_produce(security, topic, sent, **extra):
    p = Producer({"bootstrap.servers": security["bootstrap_servers"],
                  **confluent_security(security), **extra})
    for r in sent:
        p.produce(topic, r.value, r.key, headers=r.headers)
    assert p.flush(30) == 0


def first_error(security, wait=20.0, **extra) -> KafkaError:
    """The first error confluent-kafka reports for a client of ``security`` (bounded wait)."""
    errors = []
    p = Producer({"bootstrap.servers": security["bootstrap_servers"],
                  **confluent_security(security), "error_cb": errors.append, **extra})
    deadline = time.monotonic() + wait
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors, "the client connected without an error"
    return errors[0]


def tls_failure(cluster, listener, cafile=None, crlfile=None) -> str:
    """The standard library's reason for refusing the listener's certificate."""
    ctx = ssl.create_default_context(cafile=cafile or cluster.certs.ca_file)
    if crlfile:
        ctx.load_verify_locations(crlfile)
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    host, port = cluster.listener(listener).rsplit(":", 1)
    with socket.create_connection((host, int(port)), 10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError) as info:
            ctx.wrap_socket(raw, server_hostname=host).close()
    return info.value.verify_message


def test_certificates_and_stores(tmp_path):
    pytest.importorskip("cryptography")  # read in-process (cp313t has none: cffi refuses it)
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

    from tests.harness.security import make_certificates

    c = make_certificates(str(tmp_path))
    ca = x509.load_pem_x509_certificate(open(c.ca_file, "rb").read())
    server = x509.load_pem_x509_certificate(open(c.server_cert, "rb").read())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(i) for i in san.get_values_for_type(x509.IPAddress)} == {"127.0.0.1"}
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    server.verify_directly_issued_by(ca)
    crl = x509.load_pem_x509_crl(open(c.crl_file, "rb").read())
    assert crl.is_signature_valid(ca.public_key())
    for path in (c.revoked_server_cert, c.revoked_client_cert):
        serial = x509.load_pem_x509_certificate(open(path, "rb").read()).serial_number
        assert crl.get_revoked_certificate_by_serial_number(serial) is not None
    for path in (c.server_cert, c.client_cert):
        serial = x509.load_pem_x509_certificate(open(path, "rb").read()).serial_number
        assert crl.get_revoked_certificate_by_serial_number(serial) is None
    with pytest.raises(TypeError):
        load_pem_private_key(open(c.client_key_encrypted, "rb").read(), None)
    load_pem_private_key(open(c.client_key_encrypted, "rb").read(), c.client_key_password.encode())
    ks = pkcs12.load_pkcs12(open(c.keystore_p12, "rb").read(), c.keystore_password.encode())
    assert ks.key is not None
    assert ks.cert.certificate.subject.rfc4514_string().startswith("CN=client,")
    assert "password" not in repr(c) and c.keystore_password not in repr(c)
    # Java sees the CA in the PKCS12 truststore as a trusted entry
    keytool = os.path.join(os.path.dirname(os.path.realpath(java_executable())), "keytool")
    out = subprocess.run([keytool, "-list", "-keystore", c.truststore_p12, "-storetype", "PKCS12",
                          "-storepass:env", "STOREPASS"], capture_output=True, text=True,
                         env=dict(os.environ, STOREPASS=c.truststore_password), check=True)
    assert "trustedCertEntry" in out.stdout


@pytest.mark.parametrize("listener,mechanism", CASES,
                         ids=[f"{lst}-{m}" if m else lst for lst, m in CASES])
def test_round_trip(kafka_secure, topic, listener, mechanism):
    name = topic(2, cluster=kafka_secure)
    security = kafka_secure.client_config(listener, mechanism, user="bob")
    sent = records(f"{listener}/{mechanism}")
    confluent_produce(security, name, sent)
    bootstrap = kafka_secure.listener(listener)
    compare(sent, read_all_kafka_python(bootstrap, name, len(sent), security=security))
    compare(sent, read_all_confluent(bootstrap, name, len(sent), security=security))


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_gssapi_round_trip(kafka_secure, topic, listener):
    from kafka import KafkaProducer

    assert os.environ["KRB5_CLIENT_KTNAME"] == kafka_secure.kdc.client_keytab  # the fixture's
    name = topic(2, cluster=kafka_secure)
    security = kafka_secure.client_config(listener, "GSSAPI")
    sent = records(f"gssapi-{listener}")
    with KafkaProducer(**security) as p:
        for r in sent:
            p.send(name, r.value, r.key, headers=r.headers)
        p.flush(30)
    compare(sent, read_all_kafka_python(security["bootstrap_servers"], name, len(sent),
                                        security=security))
    log = open(kafka_secure.kdc.log_path).read()
    assert f"{kafka_secure.kdc.client_principal} for {kafka_secure.kdc.broker_principal}" in log


def _sasl_plain_session_lifetime_ms(cluster, listener) -> int:
    """SaslHandshake v1 + SaslAuthenticate v1 (PLAIN) by hand; the broker's
    session_lifetime_ms (KIP-368): 0 = no re-authentication required."""
    ctx = ssl.create_default_context(cafile=cluster.certs.ca_file)
    host, port = cluster.listener(listener).rsplit(":", 1)

    def recv(s, n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            assert chunk, "broker closed the connection"
            buf += chunk
        return buf

    def call(s, api_key, body, corr):
        msg = struct.pack(">hhih", api_key, 1, corr, 4) + b"test" + body
        s.sendall(struct.pack(">i", len(msg)) + msg)
        resp = recv(s, struct.unpack(">i", recv(s, 4))[0])
        assert struct.unpack(">i", resp[:4])[0] == corr
        return resp[4:]

    with socket.create_connection((host, int(port)), 10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.settimeout(10)
            assert call(s, 17, struct.pack(">h", 5) + b"PLAIN", 1)[:2] == b"\0\0"
            token = b"\0alice\0" + cluster.users["alice"].encode()
            resp = call(s, 36, struct.pack(">i", len(token)) + token, 2)
            assert resp[:2] == b"\0\0", resp
            off = 4 + max(0, struct.unpack(">h", resp[2:4])[0])  # error_message
            off += 4 + struct.unpack(">i", resp[off:off + 4])[0]  # auth_bytes
            return struct.unpack(">q", resp[off:off + 8])[0]


def test_reauth_listener_sets_a_session_lifetime(kafka_secure):
    assert 0 < _sasl_plain_session_lifetime_ms(kafka_secure, "REAUTH") <= REAUTH_MS
    assert _sasl_plain_session_lifetime_ms(kafka_secure, "SASL_SSL") == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_refused(kafka_secure, mechanism):
    security = dict(kafka_secure.client_config("SASL_SSL", mechanism),
                    sasl_plain_password="not-the-password")
    err = first_error(security)
    assert err.code() == KafkaError._AUTHENTICATION, err
    assert "not-the-password" not in err.str()


def test_plainonly_refuses_scram(kafka_secure):
    err = first_error(kafka_secure.client_config("PLAINONLY", "SCRAM-SHA-256"))
    assert err.code() == KafkaError._AUTHENTICATION and "Unsupported SASL mechanism" in err.str()


@pytest.mark.parametrize("listener,reason", [
    ("SSL", "self-signed certificate in certificate chain"),  # trusting another CA
    ("EXPIRED", "certificate has expired"),
    ("WRONGHOST", "mismatch, certificate is not valid for '127.0.0.1'"),
    ("REVOKED", "certificate revoked"),
])
def test_bad_certificates_fail_the_handshake(kafka_secure, listener, reason):
    certs = kafka_secure.certs
    security = kafka_secure.client_config(listener)
    if listener == "SSL":
        security["ssl_cafile"] = certs.untrusted_ca_file
    if listener == "REVOKED":
        security["ssl_crlfile"] = certs.crl_file
    assert reason in tls_failure(kafka_secure, listener, security["ssl_cafile"],
                                 security.get("ssl_crlfile"))
    err = first_error(security)  # librdkafka reports it as _SSL or, at times, _TRANSPORT
    assert err.code() in (KafkaError._SSL, KafkaError._TRANSPORT), err
    assert "certificate verify failed" in err.str(), err


def test_mtls_refuses_a_client_without_certificate(kafka_secure):
    security = dict(kafka_secure.client_config("MTLS"), ssl_certfile=None, ssl_keyfile=None)
    err = first_error(security)
    assert err.code() in (KafkaError._TRANSPORT, KafkaError._SSL), err
    assert "bad certificate" in err.str() or "certificate required" in err.str(), err


@pytest.mark.parametrize("listener,override", [
    ("WRONGHOST", {"ssl_check_hostname": False}),  # only the host name is wrong
    ("REVOKED", {}),  # revoked, but no CRL given
])
def test_bad_certificate_listeners_work_without_that_check(kafka_secure, topic, listener,
                                                           override):
    name = topic(1, cluster=kafka_secure)
    security = dict(kafka_secure.client_config(listener), **override)
    sent = records(listener, 2)
    confluent_produce(security, name, sent)
    compare(sent, read_all_kafka_python(security["bootstrap_servers"], name, 2,
                                        security=security))


@pytest.mark.parametrize("store", ["PKCS12", "PEM"])
def test_java_client_uses_the_stores(kafka_secure, topic, tmp_path, store):
    """Java's producer over mTLS with the truststore/keystore (as Spark would get them)."""
    c, name = kafka_secure.certs, topic(1, cluster=kafka_secure)
    props = {"security.protocol": "SSL", "ssl.truststore.type": store,
             "ssl.keystore.type": store, "acks": "all"}
    if store == "PKCS12":
        props.update({"ssl.truststore.location": c.truststore_p12,
                      "ssl.truststore.password": c.truststore_password,
                      "ssl.keystore.location": c.keystore_p12,
                      "ssl.keystore.password": c.keystore_password})
    else:
        props.update({"ssl.truststore.location": c.ca_file,
                      "ssl.keystore.location": c.keystore_pem})
    cfg = tmp_path / "producer.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = subprocess.run(java_command(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", name, "--num-records", "7",
        "--record-size", "10", "--throughput", "-1", "--producer.config", str(cfg),
        "--producer-props", f"bootstrap.servers={kafka_secure.listener('MTLS')}",
        jvm_opts=["-XX:TieredStopAtLevel=1"]), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert len(read_all_confluent(kafka_secure.listener("MTLS"), name, 7,
                                  security=kafka_secure.client_config("MTLS"))) == 7


def test_restart_keeps_the_listeners(kafka_secure_factory):
    cluster = kafka_secure_factory(kerberos=False)
    ports = dict(cluster.listener_ports)
    assert set(ports) == set(LISTENERS)
    name = cluster.create_topic("restart", 2)
    security = cluster.client_config("SASL_SSL", "SCRAM-SHA-512")
    before, after = records("before"), records("after")
    confluent_produce(security, name, before)
    cluster.stop_node(0)
    cluster.start_node(0)
    assert cluster.listener_ports == ports
    confluent_produce(security, name, after)
    compare(before + after, read_all_kafka_python(cluster.listener("SASL_SSL"), name, 10,
                                                  security=security))
