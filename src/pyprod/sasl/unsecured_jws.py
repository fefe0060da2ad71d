"""Unsecured OAUTHBEARER tokens: pyprod's OAuthBearerUnsecuredLoginCallbackHandler.

Kafka's default OAUTHBEARER login (no token endpoint configured) makes an unsecured JWS
(RFC 7515 with ``{"alg":"none"}`` and an empty signature) from the login module's options, and
the broker's default validator (OAuthBearerUnsecuredValidatorCallbackHandler) accepts it when:

- the header's ``alg`` is ``none`` and the signature part is empty;
- the principal claim (``sub`` unless renamed) is a non-blank string;
- ``exp`` is a number (seconds since the epoch) later than now;
- ``iat``, if present, is a number not in the future and before ``exp``;
- the scope claim (``scope``) is optional; it matters only if the broker requires a scope.

:class:`UnsecuredTokenProvider` is a kafka-python style ``sasl_oauth_token_provider``
(``token()`` and ``extensions()``). Build it from the JAAS module options with
:meth:`UnsecuredTokenProvider.from_options`, or directly::

    UnsecuredTokenProvider("alice", lifetime_seconds=60, extensions={"traceId": "123"})

For testing only, as in Kafka: anyone can mint such a token.
"""
from __future__ import annotations

import base64
import json
import re
import threading
import time

from pyprod.config_values import number_from_text
from pyprod.errors import KafkaConfigurationError

__all__ = ["UnsecuredTokenProvider"]

_PREFIX = "unsecuredLogin"
_STRING_CLAIM = _PREFIX + "StringClaim_"
_NUMBER_CLAIM = _PREFIX + "NumberClaim_"
_LIST_CLAIM = _PREFIX + "ListClaim_"
_EXTENSION = _PREFIX + "Extension_"
_LIFETIME = _PREFIX + "LifetimeSeconds"
_PRINCIPAL_NAME = _PREFIX + "PrincipalClaimName"
_SCOPE_NAME = _PREFIX + "ScopeClaimName"
_RESERVED_CLAIMS = ("iat", "exp")
DEFAULT_LIFETIME_SECONDS = 3600
# A token is remade once this share of its lifetime has passed (Java's refresh window factor).
REFRESH_FACTOR = 0.8

# RFC 7628 key and value syntax (Kafka's OAuthBearerClientInitialResponse); 'auth' is taken.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+\Z")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+\Z")


def _b64url(obj):
    raw = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _number(name, text):
    try:
        return number_from_text(text)
    except KafkaConfigurationError:
        raise KafkaConfigurationError(
            "option %s%s: expected a number" % (_NUMBER_CLAIM, name)) from None


def _list(text):
    """Kafka's list claim syntax: the first character is the delimiter ('|a|b' -> [a, b])."""
    if len(text) <= 1:
        return []
    return text[1:].split(text[0])


def _check_extensions(extensions):
    out = {}
    for name, value in (extensions or {}).items():
        if not isinstance(name, str) or not _EXTENSION_KEY.match(name) or name == "auth":
            raise KafkaConfigurationError(
                "OAUTHBEARER extension name %r is invalid (letters only, not 'auth')" % (name,))
        if not isinstance(value, str) or not _EXTENSION_VALUE.match(value):
            # the value is not shown: extensions may carry credentials
            raise KafkaConfigurationError(
                "OAUTHBEARER extension %r has an invalid value (printable ASCII, not empty)"
                % (name,))
        out[name] = value
    return out


class UnsecuredTokenProvider:
    """kafka-python's token provider interface over unsecured JWS tokens.

    ``principal``: the principal name (the ``sub`` claim unless ``principal_claim_name``).
    ``lifetime_seconds`` (default 3600) or ``lifetime_ms`` (which wins; may be <= 0 for an
    already expired token): ``exp`` is that far after the token is made. ``exp``: a fixed
    expiry (seconds since the epoch) instead, for tests. ``claims``: more claims (str,
    number or list of str; not ``iat``/``exp``). ``extensions``: SASL extensions.

    ``token()`` reuses its token until 80% of its lifetime has passed, then makes a new one;
    with a fixed ``exp`` it always returns the same token. The repr shows neither the token
    nor extension values.
    """

    def __init__(self, principal, *, lifetime_seconds=DEFAULT_LIFETIME_SECONDS,
                 lifetime_ms=None, exp=None, claims=None, extensions=None,
                 principal_claim_name="sub", scope_claim_name="scope", clock=time.time):
        if not isinstance(principal, str) or not principal.strip():
            raise KafkaConfigurationError(
                "an unsecured OAUTHBEARER token needs a principal name (JAAS option "
                "%s%s)" % (_STRING_CLAIM, principal_claim_name or "sub"))
        principal_claim_name = (principal_claim_name or "sub").strip() or "sub"
        claims = dict(claims or {})
        for name in claims:
            if name in _RESERVED_CLAIMS:
                raise KafkaConfigurationError("cannot set the %r claim explicitly" % (name,))
        if lifetime_ms is None:
            try:
                lifetime_ms = int(lifetime_seconds) * 1000
            except (TypeError, ValueError):
                raise KafkaConfigurationError(
                    "%s must be a whole number of seconds" % (_LIFETIME,)) from None
        claims[principal_claim_name] = principal
        self.principal = principal
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = (scope_claim_name or "scope").strip() or "scope"
        self.lifetime_ms = int(lifetime_ms)
        self.exp = exp
        self._claims = claims
        self._extensions = _check_extensions(extensions)
        self._clock = clock
        self._init_cache()

    def _init_cache(self):
        self._lock = threading.Lock()
        self._token = None
        self._refresh_at = 0.0

    @classmethod
    def from_options(cls, options, **overrides):
        """From OAuthBearerLoginModule's JAAS options (``unsecuredLoginStringClaim_sub``,
        ``unsecuredLoginLifetimeSeconds``, ``unsecuredLoginExtension_<name>``, ...). Other
        options (e.g. the broker's ``unsecuredValidator*``) are ignored as Kafka does; an
        unknown ``unsecuredLogin*`` option raises, naming it."""
        principal_name = (options.get(_PRINCIPAL_NAME) or "").strip() or "sub"
        claims, extensions = {}, {}
        for key, value in options.items():
            if key.startswith(_STRING_CLAIM) and len(key) > len(_STRING_CLAIM):
                claims[key[len(_STRING_CLAIM):]] = value
            elif key.startswith(_NUMBER_CLAIM) and len(key) > len(_NUMBER_CLAIM):
                claims[key[len(_NUMBER_CLAIM):]] = _number(key[len(_NUMBER_CLAIM):], value)
            elif key.startswith(_LIST_CLAIM) and len(key) > len(_LIST_CLAIM):
                claims[key[len(_LIST_CLAIM):]] = _list(value)
            elif key.startswith(_EXTENSION):
                extensions[key[len(_EXTENSION):]] = value
            elif key.startswith(_PREFIX) and key not in (_LIFETIME, _PRINCIPAL_NAME, _SCOPE_NAME):
                raise KafkaConfigurationError(
                    "unknown OAuthBearerLoginModule option %r" % (key,))
        principal = claims.pop(principal_name, None)
        if not isinstance(principal, str):
            principal = None  # a number or list claim is no principal: the check below says so
        kwargs = dict(claims=claims, extensions=extensions, principal_claim_name=principal_name,
                      scope_claim_name=options.get(_SCOPE_NAME) or "scope")
        if _LIFETIME in options:
            kwargs["lifetime_seconds"] = options[_LIFETIME]
        kwargs.update(overrides)
        return cls(principal, **kwargs)

    # -- kafka-python's token provider interface -------------------------------------------
    def token(self):
        """The compact serialization ``header.claims.`` (a str)."""
        with self._lock:
            now = self._clock()
            if self._token is None or (self.exp is None and now >= self._refresh_at):
                self._token, self._refresh_at = self._make(now)
            return self._token

    def extensions(self):
        """The SASL extensions (a new dict of str -> str)."""
        return dict(self._extensions)

    # -- internals -------------------------------------------------------------------------
    def _make(self, now):
        exp = self.exp if self.exp is not None else now + self.lifetime_ms / 1000.0
        # iat must precede exp for the broker even when the token is made expired
        iat = min(now, exp - 1)
        claims = {"iat": round(iat, 3), "exp": round(exp, 3)}
        claims.update(self._claims)
        token = "%s.%s." % (_b64url({"alg": "none"}), _b64url(claims))
        return token, now + (exp - now) * REFRESH_FACTOR

    def _config(self):
        return (self.principal, self.principal_claim_name, self.scope_claim_name,
                self.lifetime_ms, self.exp, json.dumps(self._claims, sort_keys=True),
                tuple(sorted(self._extensions.items())))

    def __eq__(self, other):
        return type(other) is type(self) and other._config() == self._config()

    def __hash__(self):
        return hash(self._config())

    def __getstate__(self):
        # the lock cannot be pickled; the cached token is not part of the config (equal
        # providers pickle alike, which keeps Spark's producer cache keys stable)
        state = dict(self.__dict__)
        for name in ("_lock", "_token", "_refresh_at"):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_cache()

    def __repr__(self):
        life = ("exp=%r" % (self.exp,) if self.exp is not None
                else "lifetime_ms=%d" % (self.lifetime_ms,))
        return "UnsecuredTokenProvider(principal=%r, %s, claims=%s, extensions=%s)" % (
            self.principal, life, sorted(self._claims), sorted(self._extensions))
