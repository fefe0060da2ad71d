"""OAUTHBEARER tokens from an OIDC token endpoint: the client-credentials grant (KIP-768).

:class:`OidcTokenProvider` is a ``sasl_oauth_token_provider`` (``token()``, ``extensions()``).
It fetches a token with the standard library (urllib; https through ``ssl_context`` or
``ssl_cafile``) once at construction, bounded by ``timeout_s``, then refreshes it BEFORE expiry
on its own daemon thread, as Java's login refresh does: at ``refresh_window_factor`` (0.8) of
the lifetime plus up to ``refresh_window_jitter`` (0.05), kept ``refresh_buffer_s`` before
expiry and at least ``refresh_min_period_s`` after the fetch. ``token()`` returns the cached
token at once (never a network call on the Sender thread). A failed refresh keeps the old token
while it is valid, logs the failure's type (never the secret) and retries; once the token has
expired, ``token()`` raises SaslAuthenticationFailedError. Fork-safe: a child process's first
``token()`` restarts the refresh thread. ``close()`` stops the thread.
"""
import base64
import json
import logging
import os
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from pyprod.errors import KafkaConfigurationError, KafkaTimeoutError, SaslAuthenticationFailedError
from pyprod.sasl import refresher

log = logging.getLogger(__name__)


def check_settings(token_endpoint_url, client_id, client_secret):
    """KafkaConfigurationError for settings that cannot work (no I/O, no secret shown)."""
    if not isinstance(token_endpoint_url, str) or \
            urllib.parse.urlsplit(token_endpoint_url).scheme not in ("http", "https"):
        raise KafkaConfigurationError("sasl_oauthbearer_token_endpoint_url must be an http(s) URL")
    if not client_id or not client_secret:
        raise KafkaConfigurationError("sasl_oauthbearer_client_id and "
                                      "sasl_oauthbearer_client_secret are required")


def _jwt_exp(token):
    """The token's ``exp`` claim (seconds since the epoch), or None when it is not a JWT."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


class OidcTokenProvider:
    """A token provider for the OAuth client-credentials grant; see the module doc."""

    def __init__(self, token_endpoint_url, client_id, client_secret, scope=None, extensions=None,
                 *, ssl_context=None, ssl_cafile=None, timeout_s=30.0,
                 refresh_window_factor=0.8, refresh_window_jitter=0.05,
                 refresh_min_period_s=60.0, refresh_buffer_s=300.0, retry_backoff_s=1.0):
        check_settings(token_endpoint_url, client_id, client_secret)
        self.url = token_endpoint_url
        self.client_id = client_id
        self.__secret = client_secret
        self.scope = scope
        self._extensions = dict(extensions or {})
        if ssl_context is None and ssl_cafile and token_endpoint_url.startswith("https"):
            ssl_context = ssl.create_default_context(cafile=ssl_cafile)
        self._ssl_context = ssl_context
        self.timeout_s = float(timeout_s)
        self._factor, self._jitter = refresh_window_factor, refresh_window_jitter
        self._min_period, self._buffer = refresh_min_period_s, refresh_buffer_s
        self._backoff = retry_backoff_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._token = None
        self._expires_at = 0.0      # time.time() seconds
        self._last_error = None
        self.fetches = 0
        self._pid = None
        self._thread = None
        self._store(*self._fetch())  # first token at construction: typed failure here
        self._start()

    # -- the grant ---------------------------------------------------------------------------------
    def _fetch(self):
        """(token, lifetime seconds) from the endpoint; typed errors without the secret."""
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(("%s:%s" % (urllib.parse.quote(self.client_id, safe=""),
                                             urllib.parse.quote(self.__secret, safe="")))
                                 .encode()).decode()
        req = urllib.request.Request(
            self.url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": "Basic " + basic, "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})
        self.fetches += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s,
                                        context=self._ssl_context) as resp:
                body = json.loads(resp.read(1 << 20).decode("utf-8"))
        except urllib.error.HTTPError as e:
            try:
                reason = str(json.loads(e.read(4096).decode("utf-8")).get("error", ""))[:100]
            except (ValueError, AttributeError, UnicodeDecodeError):
                reason = ""
            raise SaslAuthenticationFailedError(
                "OIDC token endpoint %s refused the client credentials of client %r: HTTP %d %s"
                % (self.url, self.client_id, e.code, reason)) from None
        except (urllib.error.URLError, OSError) as e:  # refused, unreachable, timed out, TLS
            raise KafkaTimeoutError("OIDC token endpoint %s not reachable within %.1f s: %s"
                                    % (self.url, self.timeout_s, type(e).__name__)) from None
        except (ValueError, UnicodeDecodeError):
            raise SaslAuthenticationFailedError(
                "OIDC token endpoint %s answered no JSON" % self.url) from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise SaslAuthenticationFailedError(
                "OIDC token endpoint %s answered no access_token" % self.url)
        exp = _jwt_exp(token)
        lifetime = exp - time.time() if exp is not None else float(body.get("expires_in", 3600))
        return token, lifetime

    def _store(self, token, lifetime):
        with self._lock:
            self._token, self._expires_at = token, time.time() + lifetime
            self._last_error = None
        self._lifetime = lifetime

    def _refresh_delay(self, lifetime):
        """Java's ExpiringCredentialRefreshingLogin window, in seconds from now."""
        delay = lifetime * (self._factor + random.uniform(0, self._jitter))
        if lifetime - delay < self._buffer:
            delay = lifetime - self._buffer
        return max(delay, min(self._min_period, lifetime * self._factor))

    # -- the refresh thread ------------------------------------------------------------------------
    def _start(self):
        self._pid = os.getpid()
        self._thread = refresher.start_thread(self, self._stop, self._refresh_delay(self._lifetime),
                                              "pyprod-oidc-refresh")

    def _refresh_once(self):
        """One refresh attempt; the seconds until the next."""
        try:
            self._store(*self._fetch())
            return self._refresh_delay(self._lifetime)
        except Exception as e:  # typed and secret-free by _fetch; keep the old token
            with self._lock:
                self._last_error = e
            log.warning("OIDC token refresh from %s failed (%s); the current token is "
                        "valid for %.0f s more", self.url, type(e).__name__,
                        max(self._expires_at - time.time(), 0.0))
            return self._backoff

    def token(self):
        """The cached access token (no I/O); SaslAuthenticationFailedError once it expired."""
        if self._pid != os.getpid() and not self._stop.is_set():  # forked: restart the thread
            self._start()
        with self._lock:
            token, expires_at, error = self._token, self._expires_at, self._last_error
        if time.time() >= expires_at:
            raise SaslAuthenticationFailedError(
                "the OIDC token from %s expired and could not be refreshed%s"
                % (self.url, ": %s" % error if error else ""))
        return token

    def extensions(self):
        """SASL extensions sent with the token (e.g. Confluent Cloud's logicalCluster)."""
        return dict(self._extensions)

    def close(self):
        """Stop the refresh thread (idempotent)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread() and self._pid == os.getpid():
            t.join(self.timeout_s + 1)

    def __repr__(self):
        return "<OidcTokenProvider url=%s client_id=%r>" % (self.url, self.client_id)


def parse_extensions(value):
    """sasl_oauthbearer_extensions: a dict, or librdkafka's "k1=v1,k2=v2" string."""
    if not value:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    try:
        return dict(kv.strip().split("=", 1) for kv in str(value).split(",") if kv.strip())
    except ValueError:
        raise KafkaConfigurationError(
            "sasl_oauthbearer_extensions must be a dict or 'key=value,key=value'") from None


def for_producer(config):
    """The provider a producer makes for its sasl_oauthbearer_* settings (None when it has none
    or the user passed sasl_oauth_token_provider), put in its config; the first fetch is
    bounded by min(max_block_ms, request_timeout_ms). The producer's close() closes it."""
    if config.get("sasl_mechanism") != "OAUTHBEARER" or \
            config.get("sasl_oauth_token_provider") is not None or \
            not config.get("sasl_oauthbearer_token_endpoint_url"):
        return None
    timeout_ms = min(config["max_block_ms"], config["request_timeout_ms"])
    provider = config["sasl_oauth_token_provider"] = OidcTokenProvider(
        config["sasl_oauthbearer_token_endpoint_url"], config["sasl_oauthbearer_client_id"],
        config["sasl_oauthbearer_client_secret"], config["sasl_oauthbearer_scope"],
        parse_extensions(config["sasl_oauthbearer_extensions"]),
        ssl_context=config.get("ssl_context"), ssl_cafile=config.get("ssl_cafile"),
        timeout_s=timeout_ms / 1000.0)
    return provider
