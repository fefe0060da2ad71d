"""SslFactory: the client's ssl.SSLContext from kafka-python's ssl_* configs (Java's SslFactory).

A user's ``ssl_context`` wins over everything else. Otherwise: TLS 1.2+, the CA file or the system
trust store, certificate verification always, host-name checks unless ssl_check_hostname=False,
a client certificate for mutual TLS (an encrypted key takes ssl_password), a CRL that revokes
broker certificates (ssl_crlfile, leaf check as kafka-python), and ssl_ciphers. Built once per
producer, at construction, so a bad file or password fails there.
"""
import ssl

from pyprod.errors import KafkaConfigurationError

__all__ = ["create_ssl_context", "uses_ssl"]


def uses_ssl(config):
    return config["security_protocol"] in ("SSL", "SASL_SSL")


def _password(config):
    password = config["ssl_password"]
    if callable(password):  # ssl's own convention: a callable returning the password
        return password
    return None if password is None else str(password)


def create_ssl_context(config):
    """The SSLContext for config, or None if the security protocol uses no TLS."""
    if not uses_ssl(config):
        return None
    user = config["ssl_context"]
    if user is not None:
        if not isinstance(user, ssl.SSLContext):
            raise KafkaConfigurationError("ssl_context must be an ssl.SSLContext, got %s"
                                          % type(user).__name__)
        return user
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = bool(config["ssl_check_hostname"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        if config["ssl_cafile"]:
            ctx.load_verify_locations(cafile=config["ssl_cafile"])
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (OSError, ssl.SSLError) as e:
        raise KafkaConfigurationError("ssl_cafile %r could not be loaded: %s" % (
            config["ssl_cafile"], _reason(e))) from None
    if config["ssl_certfile"]:
        try:
            ctx.load_cert_chain(config["ssl_certfile"], config["ssl_keyfile"] or None,
                                _password(config))
        except (OSError, ssl.SSLError, TypeError, ValueError) as e:
            raise KafkaConfigurationError(
                "ssl_certfile %r / ssl_keyfile %r could not be loaded (a wrong or missing "
                "ssl_password for an encrypted key gives this too): %s" % (
                    config["ssl_certfile"], config["ssl_keyfile"], _reason(e))) from None
    elif config["ssl_keyfile"]:
        raise KafkaConfigurationError("ssl_keyfile is set but ssl_certfile is not")
    if config["ssl_crlfile"]:
        try:
            ctx.load_verify_locations(cafile=config["ssl_crlfile"])
        except (OSError, ssl.SSLError) as e:
            raise KafkaConfigurationError("ssl_crlfile %r could not be loaded: %s" % (
                config["ssl_crlfile"], _reason(e))) from None
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if config["ssl_ciphers"]:
        try:
            ctx.set_ciphers(config["ssl_ciphers"])
        except ssl.SSLError as e:
            raise KafkaConfigurationError("ssl_ciphers %r: %s" % (
                config["ssl_ciphers"], _reason(e))) from None
    return ctx


def _reason(e):
    """The library's reason, never the password (ssl errors do not echo it; keep it so)."""
    return getattr(e, "reason", None) or getattr(e, "strerror", None) or type(e).__name__
