"""The TLS test certificates: a throwaway CA, server and client certificates (good, expired,
for the wrong host, revoked), a CRL, PKCS12/PEM key and trust stores (:func:`make_certificates`).

Needs the ``cryptography`` package. Where this interpreter has none (3.13t: cffi, which it needs,
refuses the free-threaded 3.13), the interpreter named by $PYPROD_CERT_PYTHON writes the same
files (scripts/pythons.sh sets it): ``python tests/harness/certificates.py DIR`` with the store
password on stdin prints the paths as JSON. Imports nothing of pyprod."""
from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

_DAY = datetime.timedelta(days=1)


@dataclass
class Certificates:
    """Paths of the PEM/PKCS12 files :func:`make_certificates` wrote (passwords not in repr)."""
    directory: str
    ca_file: str                      # the CA every good cert chains to (PEM)
    untrusted_ca_file: str            # another CA: trusting only it fails every handshake
    server_cert: str                  # SAN IP 127.0.0.1 + DNS localhost
    server_key: str
    client_cert: str                  # CN=client, for mTLS
    client_key: str
    client_key_encrypted: str         # client_key encrypted (PKCS#8) with client_key_password
    revoked_client_cert: str          # CN=revoked-client, listed in crl_file
    revoked_client_key: str
    expired_cert: str
    expired_key: str
    wrong_host_cert: str              # SAN DNS wrong.host.invalid only
    wrong_host_key: str
    revoked_server_cert: str          # SANs as server_cert, listed in crl_file
    revoked_server_key: str
    crl_file: str                     # PEM CRL by the CA: revoked_server_cert, revoked_client_cert
    truststore_p12: str               # PKCS12 truststore with the CA (Java ssl.truststore.type)
    keystore_p12: str                 # PKCS12 keystore with client cert + key
    keystore_pem: str                 # client key (PKCS#8) + cert: ssl.keystore.type=PEM
    broker_keystores: dict            # "server"/"expired"/"wrong_host"/"revoked" -> PKCS12 path
    client_key_password: str = field(repr=False, default="")
    truststore_password: str = field(repr=False, default="")
    keystore_password: str = field(repr=False, default="")
    broker_store_password: str = field(repr=False, default="")


def _x509():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
    except ImportError as e:  # the suite's setup installs it
        raise RuntimeError("the `cryptography` package is needed for the TLS test certificates "
                           "(scripts/setup.sh installs it)") from e
    return x509, hashes, serialization, ec


def _name(cn: str):
    x509 = _x509()[0]
    from cryptography.x509.oid import NameOID
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pyprod tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key():
    ec = _x509()[3]
    return ec.generate_private_key(ec.SECP256R1())


def _issue(cn, key, ca, ca_key, *, sans=(), ips=(), server=True, ca_cert=False,
           not_before=None, not_after=None):
    x509, hashes, _, _ = _x509()
    from cryptography.x509.oid import ExtendedKeyUsageOID
    now = datetime.datetime.now(datetime.timezone.utc)
    issuer = _name(cn) if ca is None else ca.subject
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(issuer)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(not_before or now - _DAY).not_valid_after(not_after or now + 30 * _DAY)
         .add_extension(x509.BasicConstraints(ca=ca_cert, path_length=None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                        critical=False))
    if ca_cert:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                          False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False,
                                          False), critical=True)
        b = b.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False)
    if ca is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_key.public_key()), critical=False)
    alt = [x509.DNSName(s) for s in sans] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if alt:
        b = b.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return b.sign(ca_key if ca_key is not None else key, hashes.SHA256())


def _write(path: str, data: bytes, mode: int = 0o600) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def make_certificates(directory: str, *, password: str = "pyprod-store-secret") -> Certificates:
    """Write a fresh CA, server/client certificates, a CRL and key/trust stores to
    ``directory``; every store and the encrypted key use ``password``."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        if os.environ.get("PYPROD_CERT_PYTHON"):
            return _made_elsewhere(os.environ["PYPROD_CERT_PYTHON"], directory, password)
    x509, hashes, ser, _ = _x509()
    from cryptography.hazmat.primitives.serialization import pkcs12
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    pem = ser.Encoding.PEM
    enc = ser.BestAvailableEncryption(password.encode())

    def path(name):
        return os.path.join(directory, name)

    def save(name, cert, key):
        _write(path(name + ".crt"), cert.public_bytes(pem), 0o644)
        _write(path(name + ".key"), key.private_bytes(pem, ser.PrivateFormat.PKCS8,
                                                      ser.NoEncryption()))
        return path(name + ".crt"), path(name + ".key")

    ca_key, other_key = _key(), _key()
    ca = _issue("pyprod test CA", ca_key, None, None, ca_cert=True)
    other_ca = _issue("pyprod untrusted CA", other_key, None, None, ca_cert=True)
    _write(path("ca.crt"), ca.public_bytes(pem), 0o644)
    _write(path("untrusted-ca.crt"), other_ca.public_bytes(pem), 0o644)
    good_host = dict(sans=["localhost"], ips=["127.0.0.1"])
    made = {}
    specs = {
        "server": dict(good_host),
        "client": dict(server=False),
        "revoked-client": dict(server=False),
        "expired": dict(good_host, not_before=now - 30 * _DAY, not_after=now - _DAY),
        "wrong-host": dict(sans=["wrong.host.invalid"]),
        "revoked-server": dict(good_host),
    }
    for name, kw in specs.items():
        key = _key()
        cert = _issue(name, key, ca, ca_key, **kw)
        made[name] = (cert, key, *save(name, cert, key))

    crl = x509.CertificateRevocationListBuilder().issuer_name(ca.subject) \
        .last_update(now - _DAY).next_update(now + 30 * _DAY)
    for name in ("revoked-server", "revoked-client"):
        crl = crl.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(made[name][0].serial_number)
            .revocation_date(now - _DAY).build())
    _write(path("ca.crl"), crl.sign(ca_key, hashes.SHA256()).public_bytes(pem), 0o644)

    client_cert, client_key = made["client"][:2]
    _write(path("client-encrypted.key"),
           client_key.private_bytes(pem, ser.PrivateFormat.PKCS8, enc))
    _write(path("client-keystore.pem"),
           client_key.private_bytes(pem, ser.PrivateFormat.PKCS8, ser.NoEncryption())
           + client_cert.public_bytes(pem))
    _write(path("truststore.p12"), pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca, b"ca")], enc), 0o644)
    _write(path("client-keystore.p12"), pkcs12.serialize_key_and_certificates(
        b"client", client_key, client_cert, [ca], enc))
    broker_stores = {}
    for label, name in (("server", "server"), ("expired", "expired"),
                        ("wrong_host", "wrong-host"), ("revoked", "revoked-server")):
        cert, key = made[name][:2]
        broker_stores[label] = _write(path(f"broker-{name}.p12"),
                                      pkcs12.serialize_key_and_certificates(
                                          b"broker", key, cert, [ca], enc))
    return Certificates(
        directory=directory, ca_file=path("ca.crt"), untrusted_ca_file=path("untrusted-ca.crt"),
        server_cert=made["server"][2], server_key=made["server"][3],
        client_cert=made["client"][2], client_key=made["client"][3],
        client_key_encrypted=path("client-encrypted.key"),
        revoked_client_cert=made["revoked-client"][2],
        revoked_client_key=made["revoked-client"][3],
        expired_cert=made["expired"][2], expired_key=made["expired"][3],
        wrong_host_cert=made["wrong-host"][2], wrong_host_key=made["wrong-host"][3],
        revoked_server_cert=made["revoked-server"][2],
        revoked_server_key=made["revoked-server"][3],
        crl_file=path("ca.crl"), truststore_p12=path("truststore.p12"),
        keystore_p12=path("client-keystore.p12"), keystore_pem=path("client-keystore.pem"),
        broker_keystores=broker_stores, client_key_password=password,
        truststore_password=password, keystore_password=password,
        broker_store_password=password)


def _made_elsewhere(python: str, directory: str, password: str) -> Certificates:
    # PYTHON_GIL=0 (a free-threaded run's) aborts a GIL build of CPython: not passed on
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    out = subprocess.run([python, os.path.abspath(__file__), directory], input=password,
                         capture_output=True, text=True, timeout=120, env=env)
    if out.returncode:
        raise RuntimeError("PYPROD_CERT_PYTHON=%s did not write the certificates:\n%s"
                           % (python, out.stderr[-2000:]))
    return Certificates(**json.loads(out.stdout))


if __name__ == "__main__":
    made = make_certificates(sys.argv[1], password=sys.stdin.read())
    print(json.dumps({f.name: getattr(made, f.name) for f in dataclasses.fields(made)}))
