"""SASL/OAUTHBEARER (RFC 7628, KIP-255): the token from kafka-python's
``sasl_oauth_token_provider`` (``token()``, optional ``extensions()``) in one message.

A broker that refuses the token answers with a JSON error as a challenge; the client must send a
lone kvsep (0x01), after which the broker fails the authentication (RFC 7628 section 3.2.3).
"""
import json

from pyprod.errors import SaslAuthenticationFailedError

_SEP = "\x01"


class OAuthBearerSaslClient:
    name = "OAUTHBEARER"

    def __init__(self, token_provider):
        self._provider = token_provider
        self._error = None

    def first(self):
        try:
            token = self._provider.token()
            extensions = getattr(self._provider, "extensions", lambda: {})() or {}
        except Exception as e:  # the user's provider: typed, and without its message
            raise SaslAuthenticationFailedError(
                "sasl_oauth_token_provider failed to give a token: %s" % type(e).__name__) from None
        if not isinstance(token, str) or not token:
            raise SaslAuthenticationFailedError(
                "sasl_oauth_token_provider.token() must return a non-empty str")
        ext = "".join("%s=%s%s" % (k, v, _SEP) for k, v in dict(extensions).items())
        return ("n,,%sauth=Bearer %s%s%s%s" % (_SEP, token, _SEP, ext, _SEP)).encode("utf-8")

    def evaluate(self, challenge):
        if not challenge:
            return None
        try:  # the broker's error, e.g. {"status":"invalid_token"}; never the token itself
            status = json.loads(bytes(challenge).decode("utf-8")).get("status", "invalid_token")
            status = str(status)[:100]
        except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, nested
            status = "invalid_token"                            # too deep for the parser
        self._error = status
        return _SEP.encode()

    @property
    def error(self):
        """The broker's status for a refused token (e.g. 'invalid_token'), else None."""
        return self._error

    def __repr__(self):
        return "<OAuthBearerSaslClient>"
