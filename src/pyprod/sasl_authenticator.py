"""SaslClientAuthenticator: the SASL exchange on one connection, as Java's (KIP-152, KIP-368).

After ApiVersions: SaslHandshake v1 names the mechanism, then SaslAuthenticate requests carry
the mechanism's tokens until it is complete. I/O free: ConnectionLifecycle sends what ``start()``
and ``on_response()`` return and feeds back the response bodies. ``session_lifetime_ms`` (> 0 when
the broker sets connections.max.reauth.ms) tells when to authenticate again on the same
connection (``reauth_at``, 85-95% of the lifetime, as Java).
"""
import random

from pyprod import errors, sasl
from pyprod.protocol import api_versions as api_versions_api
from pyprod.protocol import sasl_authenticate, sasl_handshake

__all__ = ["SaslClientAuthenticator"]


class SaslClientAuthenticator:
    def __init__(self, config, host, node_id):
        self._config = config
        self._host = host
        self._node_id = node_id
        self.mechanism_name = config["sasl_mechanism"]
        self._mechanism = None
        self._auth_version = 0
        self.session_lifetime_ms = 0

    def start(self, broker_versions):
        """The first request: (api_key, version, body). Raises if the broker has no SASL."""
        if sasl_handshake.API_KEY not in broker_versions:
            raise errors.IllegalSaslStateError(
                "node %s offers no SaslHandshake: is this a SASL listener?" % (self._node_id,))
        if sasl_authenticate.API_KEY not in broker_versions or \
                api_versions_api.pick_version(sasl_handshake, broker_versions) < 1:
            # Kafka 0.10-0.11: tokens framed raw after SaslHandshake v0, which pyprod does not speak
            raise errors.UnsupportedVersionError(
                "node %s: SASL needs a broker of Kafka 1.0 or newer (SaslHandshake v1 and "
                "SaslAuthenticate); this one offers only SaslHandshake v0 (Kafka 0.10 or 0.11)"
                % (self._node_id,))
        hs = api_versions_api.pick_version(sasl_handshake, broker_versions)
        self._auth_version = api_versions_api.pick_version(sasl_authenticate, broker_versions)
        self._mechanism = sasl.create(self._config, self._host)
        return (sasl_handshake.API_KEY, hs,
                sasl_handshake.encode_request(hs, self.mechanism_name))

    def on_response(self, api_key, version, body):
        """The next request, or None once authenticated. Raises typed errors on failure."""
        if api_key == sasl_handshake.API_KEY:
            resp = sasl_handshake.decode_response(version, body, strict=False)
            if resp.error_code:
                err = errors.for_code(resp.error_code)
                if err is errors.UnsupportedSaslMechanismError:
                    raise err("node %s does not enable SASL mechanism %s (enabled: %s)" % (
                        self._node_id, self.mechanism_name, ", ".join(resp.mechanisms)))
                raise err("SaslHandshake with node %s failed" % (self._node_id,))
            return self._authenticate(self._mechanism.first())
        resp = sasl_authenticate.decode_response(version, body, strict=False)
        if resp.error_code:
            err = errors.for_code(resp.error_code)
            if not issubclass(err, errors.AuthenticationFailedError):
                err = errors.SaslAuthenticationFailedError
            refused = getattr(self._mechanism, "error", None)
            raise err("SASL %s authentication with node %s failed: %s%s" % (
                self.mechanism_name, self._node_id, resp.error_message or err.__name__,
                " (token status: %s)" % refused if refused else ""))
        token = self._mechanism.evaluate(resp.auth_bytes)
        if token is None:
            self.session_lifetime_ms = resp.session_lifetime_ms or 0
            self._mechanism = None
            return None
        return self._authenticate(token)

    def _authenticate(self, token):
        v = self._auth_version
        return sasl_authenticate.API_KEY, v, sasl_authenticate.encode_request(v, token)

    def reauth_at(self, authenticated_ms):
        """When to authenticate again (monotonic ms), or None if the session does not expire."""
        if self.session_lifetime_ms <= 0:
            return None
        return authenticated_ms + int(self.session_lifetime_ms * random.uniform(0.85, 0.95))
