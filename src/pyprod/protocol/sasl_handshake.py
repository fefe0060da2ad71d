"""SaslHandshake (key 17), v0..v1. v1 (KIP-152): the SASL tokens that follow travel in
SaslAuthenticate requests, which is the only layout pyprod speaks."""
from .schema import Api, Field, Struct

REQUEST = Struct("SaslHandshakeRequest", [
    Field("mechanism", "string"),
])
RESPONSE = Struct("SaslHandshakeResponse", [
    Field("error_code", "int16"),
    Field("mechanisms", "[]string"),
])

API = Api(17, "SaslHandshake", 0, 1, 99, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, mechanism):
    return API.encode_request(version, {"mechanism": mechanism})


def decode_response(version, data, strict=True):
    """SaslHandshakeResponse(error_code, mechanisms)."""
    return API.decode_response(version, data, strict)
