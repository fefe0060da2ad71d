"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ScramSaslClient.

client-first -> server-first (nonce, salt, iterations) -> client-final (proof) -> server-final
(the server's signature, checked here, so a broker that does not know the password is refused).
"""
import base64
import hashlib
import hmac
import secrets
import unicodedata

from pyprod.errors import SaslAuthenticationFailedError

_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
_MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
_MAX_ITERATIONS = 16384  # Kafka's ScramMechanism maximum: a broker cannot store more, and
                        # a hostile one would otherwise cost seconds of CPU per login


def _saslname(name):
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message, what):
    try:
        text = bytes(message).decode("utf-8")
        return dict(item.split("=", 1) for item in text.split(",") if item)
    except (UnicodeDecodeError, ValueError):
        raise SaslAuthenticationFailedError("malformed SCRAM %s message" % what) from None


class ScramSaslClient:
    def __init__(self, mechanism, username, password, nonce=None):
        self.name = mechanism
        self._hash = _HASHES[mechanism]
        self._username = username
        self._password = password
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        self._client_first_bare = "n=%s,r=%s" % (_saslname(username), self._nonce)
        self._server_signature = None

    def _hmac(self, key, msg):
        return hmac.new(key, msg, self._hash).digest()

    def first(self):
        return ("n,," + self._client_first_bare).encode("utf-8")

    def evaluate(self, challenge):
        if self._server_signature is None:
            return self._client_final(challenge)
        attrs = _attributes(challenge, "server-final")
        if "e" in attrs:
            raise SaslAuthenticationFailedError("SCRAM authentication failed: %s" % attrs["e"])
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationFailedError(
                "SCRAM: the broker's signature is invalid (it does not know the credentials)")
        return None

    def _client_final(self, challenge):
        server_first = bytes(challenge).decode("utf-8", "replace")
        attrs = _attributes(challenge, "server-first")
        if "e" in attrs:
            raise SaslAuthenticationFailedError("SCRAM authentication failed: %s" % attrs["e"])
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce) or salt is None:
            raise SaslAuthenticationFailedError("SCRAM: invalid server-first message")
        try:
            iterations = int(iterations)
            salt = base64.b64decode(salt, validate=True)
        except ValueError:
            raise SaslAuthenticationFailedError("SCRAM: invalid salt or iteration count") from None
        if not _MIN_ITERATIONS <= iterations <= _MAX_ITERATIONS:
            raise SaslAuthenticationFailedError(
                "SCRAM: iteration count %d out of range" % iterations)
        password = unicodedata.normalize("NFKC", self._password).encode("utf-8")
        salted = hashlib.pbkdf2_hmac(self._hash().name, password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = self._hash(client_key).digest()
        without_proof = "c=biws,r=" + nonce
        auth_message = ",".join((self._client_first_bare, server_first, without_proof))
        signature = self._hmac(stored_key, auth_message.encode("utf-8"))
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message.encode("utf-8"))
        return ("%s,p=%s" % (without_proof, base64.b64encode(proof).decode("ascii"))).encode()

    def __repr__(self):
        return "<ScramSaslClient %s user=%r>" % (self.name, self._username)
