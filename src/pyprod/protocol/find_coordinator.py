"""FindCoordinator (key 10), v0..v5; v3+ flexible, v4+ batches keys (one key sent here).

key_type: 0 group, 1 transaction. coordinator() gives the same view of every version.
"""
from collections import namedtuple

from .schema import Api, Field, Struct

GROUP, TRANSACTION = 0, 1

REQUEST = Struct("FindCoordinatorRequest", [
    Field("key", "string", "0-3"),
    Field("key_type", "int8", "1+"),
    Field("coordinator_keys", "[]string", "4+"),
])
Coordinator = Struct("Coordinator", [
    Field("key", "string", "4+"),
    Field("node_id", "int32", "4+"),
    Field("host", "string", "4+"),
    Field("port", "int32", "4+"),
    Field("error_code", "int16", "4+"),
    Field("error_message", "string", "4+", nullable="4+", default=None),
])
RESPONSE = Struct("FindCoordinatorResponse", [
    Field("throttle_time_ms", "int32", "1+"),
    Field("error_code", "int16", "0-3"),
    Field("error_message", "string", "1-3", nullable="1-3", default=None),
    Field("node_id", "int32", "0-3"),
    Field("host", "string", "0-3"),
    Field("port", "int32", "0-3"),
    Field("coordinators", "[]", "4+", fields=Coordinator),
])

API = Api(10, "FindCoordinator", 0, 5, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from

CoordinatorResult = namedtuple("CoordinatorResult",
                               "key node_id host port error_code error_message")


def encode_request(version, key, key_type=GROUP):
    if version == 0 and key_type != GROUP:
        raise ValueError("FindCoordinator v0 only finds group coordinators")
    return API.encode_request(version, {"key": key, "key_type": key_type,
                                        "coordinator_keys": (key,)})


def decode_response(version, data, strict=True):
    return API.decode_response(version, data, strict)


def coordinator(response, key=None):
    """CoordinatorResult for ``key`` (the first/only one when key is None), any version."""
    if not response.coordinators:
        return CoordinatorResult(key, response.node_id, response.host, response.port,
                                 response.error_code, response.error_message)
    for c in response.coordinators:
        if key is None or c.key == key:
            return CoordinatorResult(*c)
    raise KeyError("no coordinator for key %r in the response" % (key,))
