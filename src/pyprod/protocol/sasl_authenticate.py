"""SaslAuthenticate (key 36), v0..v2; v1+ returns the session lifetime (KIP-368), v2+ flexible."""
from .schema import Api, Field, Struct

REQUEST = Struct("SaslAuthenticateRequest", [
    Field("auth_bytes", "bytes"),
])
RESPONSE = Struct("SaslAuthenticateResponse", [
    Field("error_code", "int16"),
    Field("error_message", "string", nullable="0+", default=None),
    Field("auth_bytes", "bytes"),
    Field("session_lifetime_ms", "int64", "1+"),
])

API = Api(36, "SaslAuthenticate", 0, 2, 2, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, auth_bytes):
    return API.encode_request(version, {"auth_bytes": bytes(auth_bytes)})


def decode_response(version, data, strict=True):
    """SaslAuthenticateResponse(error_code, error_message, auth_bytes, session_lifetime_ms)."""
    return API.decode_response(version, data, strict)
