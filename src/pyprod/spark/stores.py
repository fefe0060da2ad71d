"""Kafka's truststore/keystore options -> the PEM files pyprod's ssl_* keys take.

- ``kafka.ssl.truststore.location``/``.password``/``.type`` -> ssl_cafile.
- ``kafka.ssl.keystore.location``/``.password``/``.type`` and ``kafka.ssl.key.password``
  (mutual TLS) -> ssl_certfile, ssl_keyfile and ssl_password.

Types:

- PEM is used as it is: a truststore of certificates, a keystore holding the private key
  (encrypted or not: ``kafka.ssl.key.password``) and its certificate chain. As in Kafka, a PEM
  store takes no store password.
- PKCS12 is converted to PEM with the ``cryptography`` package, into a fresh private directory
  (mode 0700, files 0600; a private key stays encrypted with the key password, or the store
  password, when there is one). The producer's SSLContext is built from those files by
  pyprod.ssl_factory, as the producer would, and the directory is removed right away: the
  producer gets ``ssl_context``. No key material outlives the producer's construction on disk.
- JKS and JCEKS fail early with the keytool command that converts them.
- Without a type (Kafka's default is JKS, whose Java loader also reads PKCS12), the file's
  first bytes decide, or its name (.p12/.pfx/.pem/.crt/.jks) where the file is not readable.

The paths name files on the executors. Planning (on the driver) builds a :class:`Store` and
checks what it can: the type, the options that go together and, when the file is readable
there too, its content and password. Conversion happens where the producer is created
(:func:`materialize`, from the producer cache's factory). The producer cache keys on the
Store (its options), so equal options share one producer per worker.
"""
from __future__ import annotations

import os
import shutil
import ssl
import tempfile

from pyprod import config as configuration
from pyprod.errors import KafkaConfigurationError
from pyprod.ssl_factory import create_ssl_context, uses_ssl

TRUSTSTORE, KEYSTORE = "truststore", "keystore"
PEM, PKCS12 = "PEM", "PKCS12"
_UNREADABLE = ("JKS", "JCEKS")
_BY_SUFFIX = {".p12": PKCS12, ".pfx": PKCS12, ".pem": PEM, ".crt": PEM, ".cer": PEM,
              ".jks": "JKS", ".jceks": "JCEKS"}
# the config each role fills, and the pyprod configs a store of that role sets
_TARGET = {TRUSTSTORE: "ssl_cafile", KEYSTORE: "ssl_certfile"}
SETS = {"ssl_cafile": ("ssl_cafile",),
        "ssl_certfile": ("ssl_certfile", "ssl_keyfile", "ssl_password")}


def _opt(role, name):
    return "kafka.ssl.%s.%s" % (role, name)


class Store:
    """A truststore or keystore as the options give it (picklable; the repr leaves the
    passwords out)."""

    def __init__(self, role, location, type=None, password=None, key_password=None):
        self.role, self.location, self.type = role, location, type
        self.password, self.key_password = password, key_password

    def _identity(self):
        return (self.role, self.location, self.type, self.password, self.key_password)

    def __eq__(self, other):
        return type(other) is Store and other._identity() == self._identity()

    def __hash__(self):
        return hash(self._identity())

    def __repr__(self):
        return "Store(%s, %r, type=%s%s%s)" % (
            self.role, self.location, self.type or "auto",
            ", password=***" if self.password is not None else "",
            ", key_password=***" if self.key_password is not None else "")


# -- the driver side -------------------------------------------------------------------------
def _sniff(head):
    """The store type of a file starting with ``head``, or None."""
    if head.startswith(b"\xfe\xed\xfe\xed"):
        return "JKS"
    if head.startswith(b"\xce\xce\xce\xce"):
        return "JCEKS"
    if b"-----BEGIN " in head:
        return PEM
    if head[:1] == b"\x30":  # a DER SEQUENCE
        return PKCS12
    return None


def _read(location):
    """The file's bytes, or None where it is not readable (it may exist on executors only)."""
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError:
        return None


def _unreadable_type(role, location, kind):
    return KafkaConfigurationError(
        "%s is a %s store, which pyprod cannot read. Convert it to PKCS12: keytool "
        "-importkeystore -srckeystore %s -srcstoretype %s -destkeystore <new>.p12 "
        "-deststoretype PKCS12, then set %s=<new>.p12 and %s=PKCS12"
        % (_opt(role, "location"), kind, location, kind, _opt(role, "location"),
           _opt(role, "type")))


def store_type(role, location, given, data=None):
    """PEM or PKCS12 (None: decide on the executor from the content)."""
    sniffed = _sniff(data[:65536]) if data is not None else None
    if sniffed in _UNREADABLE:  # whatever the type option says
        raise _unreadable_type(role, location, sniffed)
    if given:
        kind = given.strip().upper()
        if kind in _UNREADABLE:
            raise _unreadable_type(role, location, kind)
        if kind not in (PEM, PKCS12):
            raise KafkaConfigurationError("%s=%s is not supported: use PEM or PKCS12" % (
                _opt(role, "type"), given))
        return kind
    kind = sniffed
    if kind is None:
        kind = _BY_SUFFIX.get(os.path.splitext(location)[1].lower())
    if kind in _UNREADABLE:
        raise _unreadable_type(role, location, kind)
    if kind is None and data is not None:
        raise KafkaConfigurationError(
            "%s: %s is neither PEM nor PKCS12 (set %s)" % (
                _opt(role, "location"), location, _opt(role, "type")))
    return kind


def from_options(props):
    """Pop the store options from ``props`` (Java names without 'kafka.', lower case) and
    return pyprod keys: ssl_cafile / ssl_certfile as Stores, ssl_check_hostname, and
    ssl_password when a key password comes without a keystore (for kafka.ssl.certfile)."""
    out = {}
    key_password = props.pop("ssl.key.password", None)
    for role in (TRUSTSTORE, KEYSTORE):
        location = props.pop("ssl.%s.location" % role, None)
        password = props.pop("ssl.%s.password" % role, None)
        given = props.pop("ssl.%s.type" % role, None)
        if not location:
            continue  # as in Kafka, a type or password without a location is unused
        store = Store(role, location, None, password,
                      key_password if role == KEYSTORE else None)
        store.type = check(store, given)
        out[_TARGET[role]] = store
    if key_password is not None and "ssl_certfile" not in out:
        out["ssl_password"] = key_password  # for kafka.ssl.certfile / kafka.ssl.keyfile
    algorithm = props.pop("ssl.endpoint.identification.algorithm", None)
    if algorithm is not None:
        low = algorithm.strip().lower()
        if low not in ("", "https"):
            raise KafkaConfigurationError(
                "kafka.ssl.endpoint.identification.algorithm must be 'https' (check the "
                "broker's host name, the default) or '' (do not)")
        out["ssl_check_hostname"] = low == "https"
    return out


def check(store, given=None):
    """Check ``store`` on the driver: its type (returned) and, when the file is readable
    here, its content and passwords."""
    data = _read(store.location)
    kind = store_type(store.role, store.location, given, data)
    if kind == PEM and store.password is not None:
        raise KafkaConfigurationError(
            "%s cannot be set for a PEM store (as in Kafka)%s" % (
                _opt(store.role, "password"),
                "; an encrypted key takes kafka.ssl.key.password"
                if store.role == KEYSTORE else ""))
    if data is not None and kind is not None:
        _convert(Store(store.role, store.location, kind, store.password, store.key_password),
                 data)
    return kind


def for_validation(configs):
    """``configs`` with each Store replaced by its location (for pyprod.config.build)."""
    return {k: (v.location if isinstance(v, Store) else v) for k, v in configs.items()}


# -- the executor side -----------------------------------------------------------------------
def _load_pkcs12(store, data):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise KafkaConfigurationError(
            "%s=PKCS12 needs the 'cryptography' package (pip install cryptography) where "
            "the producer runs" % (_opt(store.role, "type"),)) from None
    tries = [store.password]
    if store.key_password not in tries:
        tries.append(store.key_password)
    for password in tries:
        try:
            return pkcs12.load_pkcs12(data, password.encode() if password else None)
        except (ValueError, TypeError):
            continue
    raise KafkaConfigurationError(
        "cannot read %s as PKCS12: a wrong or missing %s, or not a PKCS12 file" % (
            _opt(store.role, "location"), _opt(store.role, "password")))


def _pem_certs(certs):
    from cryptography.hazmat.primitives.serialization import Encoding
    return b"".join(c.public_bytes(Encoding.PEM) for c in certs)


def _write(directory, name, data):
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _private_dir():
    path = tempfile.mkdtemp(prefix="pyprod-ssl-")
    os.chmod(path, 0o700)
    return path


def _convert(store, data, directory=None):
    """The pyprod configs for ``store`` (file content ``data``), PKCS12 written as PEM files
    into ``directory``; without a directory only the checks."""
    kind = store.type or store_type(store.role, store.location, None, data)
    if kind == PEM:
        return _check_pem(store)
    p12 = _load_pkcs12(store, data)
    certs = ([p12.cert.certificate] if p12.cert else []) + [
        c.certificate for c in p12.additional_certs]
    if store.role == TRUSTSTORE:
        if not certs:
            raise KafkaConfigurationError("%s holds no certificate" % (
                _opt(store.role, "location"),))
        if directory is None:
            return {}
        return {"ssl_cafile": _write(directory, "truststore.pem", _pem_certs(certs))}
    if p12.key is None or p12.cert is None:
        raise KafkaConfigurationError("%s holds no private key with its certificate" % (
            _opt(store.role, "location"),))
    if directory is None:
        return {}
    from cryptography.hazmat.primitives import serialization as ser
    password = store.key_password or store.password
    encryption = (ser.BestAvailableEncryption(password.encode()) if password
                  else ser.NoEncryption())
    key = p12.key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, encryption)
    return {"ssl_certfile": _write(directory, "keystore.crt.pem", _pem_certs(certs)),
            "ssl_keyfile": _write(directory, "keystore.key.pem", key),
            "ssl_password": password or None}


def _check_pem(store):
    """PEM stores are used in place; the checks load them the way ssl will."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if store.role == TRUSTSTORE:
            ctx.load_verify_locations(cafile=store.location)
        else:
            # a callable, so that OpenSSL never prompts for a missing password
            ctx.load_cert_chain(store.location, password=lambda: store.key_password or "")
    except (ssl.SSLError, OSError) as e:
        hint = (" (a wrong or missing kafka.ssl.key.password?)" if store.role == KEYSTORE
                else "")
        raise KafkaConfigurationError("cannot load %s %s as PEM%s: %s" % (
            _opt(store.role, "location"), store.location, hint,
            getattr(e, "reason", None) or type(e).__name__)) from None
    if store.role == TRUSTSTORE:
        return {"ssl_cafile": store.location}
    out = {"ssl_certfile": store.location}
    if store.key_password is not None:
        out["ssl_password"] = store.key_password
    return out


def materialize(configs):
    """KafkaProducer configs for ``configs``: a PEM Store becomes its path. PKCS12 Stores are
    converted to PEM files in a fresh private directory, loaded into the SSLContext the
    producer would build (pyprod.ssl_factory), and the directory is removed at once: the
    producer gets that ssl_context. Stores are dropped where the protocol uses no TLS."""
    found = [v for v in configs.values() if isinstance(v, Store)]
    if not found:
        return configs
    out = {k: v for k, v in configs.items() if not isinstance(v, Store)}
    if not uses_ssl({"security_protocol": configs.get("security_protocol", "PLAINTEXT")}):
        return out
    directory = None
    try:
        for store in found:
            data = _read(store.location)
            if data is None:
                raise KafkaConfigurationError("%s %s cannot be read here" % (
                    _opt(store.role, "location"), store.location))
            if (store.type or store_type(store.role, store.location, None, data)) == PKCS12:
                directory = directory or _private_dir()
                out.update(_convert(store, data, directory))
            else:
                out.update(_check_pem(store))
        if directory is None:
            return out
        try:
            context = create_ssl_context(configuration.build(**out))
        except KafkaConfigurationError:
            raise KafkaConfigurationError(
                "the PEM converted from %s could not be loaded" % " and ".join(
                    _opt(s.role, "location") for s in found)) from None
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
        out.pop(key, None)  # loaded into the context
    out["ssl_context"] = context
    return out
