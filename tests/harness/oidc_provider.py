"""A small OIDC identity provider on 127.0.0.1 for OAUTHBEARER tests (stdlib http.server).

``OidcProvider(clients={"pyprod": "s3cret"}).start()`` serves ``token_url`` (the OAuth
client-credentials grant: Basic auth or form client_id/client_secret, optional scope) and
``jwks_url`` (the RSA public key). Tokens are RS256 JWTs signed with a key made by
``cryptography``: ``sub`` = client id, ``aud`` = ``audience``, ``exp`` = now + ``lifetime_s``.
Controls (attributes, changeable while running): ``lifetime_s``, ``audience``, ``delay_s`` (the
token endpoint answers slowly), ``fail_status`` (answer that HTTP status instead of a token),
``allowed_scopes``. ``fetches`` counts the tokens issued, ``requests`` every token request
(refused ones too).
"""
from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer



# the client secret tests use (a value to look for in logs and reprs)
TEST_CLIENT_SECRET = "oidc-client-s3cret-value"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class OidcProvider:
    def __init__(self, clients: dict, *, audience: str = "kafka", lifetime_s: float = 3600,
                 allowed_scopes: tuple = ("kafka",), issuer: str = "pyprod-test-idp"):
        self.clients = dict(clients)
        self.audience, self.lifetime_s, self.issuer = audience, lifetime_s, issuer
        self.allowed_scopes = set(allowed_scopes)
        self.delay_s = 0.0
        self.fail_status = None
        self.fetches = 0
        self.requests = 0
        from cryptography.hazmat.primitives.asymmetric import rsa  # the wheel tests lack it
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "pyprod-test-key"
        self._server = None

    # -- tokens ------------------------------------------------------------------------------------
    def make_token(self, sub: str, scope: str = "", lifetime_s: float | None = None,
                   audience: str | None = None) -> str:
        now = int(time.time())
        life = self.lifetime_s if lifetime_s is None else lifetime_s
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"sub": sub, "iss": self.issuer, "iat": now, "exp": int(now + life),
                  "aud": self.audience if audience is None else audience, "scope": scope}
        signing = ".".join(_b64(json.dumps(p).encode()) for p in (header, claims))
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        sig = self._key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing + "." + _b64(sig)

    def jwks(self) -> dict:
        pub = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": _int_b64(pub.n), "e": _int_b64(pub.e)}]}

    def _grant(self, headers, body: bytes):
        """(status, JSON dict) for a token request."""
        self.requests += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail_status:
            return self.fail_status, {"error": "temporarily_unavailable"}
        form = dict(urllib.parse.parse_qsl(body.decode()))
        cid, secret = form.get("client_id"), form.get("client_secret")
        auth = headers.get("Authorization", "")
        if auth.startswith("Basic "):
            raw = base64.b64decode(auth[6:]).decode()
            cid, _, secret = (urllib.parse.unquote(x) for x in raw.partition(":"))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if cid not in self.clients or self.clients[cid] != secret:
            return 401, {"error": "invalid_client"}
        scope = form.get("scope", "")
        if scope and not set(scope.split()) <= self.allowed_scopes:
            return 400, {"error": "invalid_scope"}
        self.fetches += 1
        return 200, {"access_token": self.make_token(cid, scope), "token_type": "Bearer",
                     "expires_in": int(self.lifetime_s)}

    # -- server ------------------------------------------------------------------------------------
    def start(self) -> "OidcProvider":
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/jwks":
                    self._send(200, provider.jwks())
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/token":
                    return self._send(404, {"error": "not_found"})
                self._send(*provider._grant(self.headers, body))

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="oidc-provider",
                         daemon=True).start()
        return self

    @property
    def base_url(self) -> str:
        return "http://127.0.0.1:%d" % self._server.server_address[1]

    @property
    def token_url(self) -> str:
        return self.base_url + "/token"

    @property
    def jwks_url(self) -> str:
        return self.base_url + "/jwks"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
