"""EndTxn (key 26), v0..v5; v3+ flexible.

v5 is transactions v2 (KIP-890 part 2): the coordinator bumps the epoch at every commit or
abort, and the response carries the producer id and epoch to use next (-1 before v5).
"""
from .schema import Api, Field, Struct

REQUEST = Struct("EndTxnRequest", [
    Field("transactional_id", "string"),
    Field("producer_id", "int64"),
    Field("producer_epoch", "int16"),
    Field("committed", "bool"),
])
RESPONSE = Struct("EndTxnResponse", [
    Field("throttle_time_ms", "int32"),
    Field("error_code", "int16"),
    Field("producer_id", "int64", "5+", default=-1),
    Field("producer_epoch", "int16", "5+", default=-1),
])

API = Api(26, "EndTxn", 0, 5, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_id, producer_id, producer_epoch, committed):
    """committed: True commits the transaction, False aborts it."""
    return API.encode_request(version, {
        "transactional_id": transactional_id,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "committed": bool(committed),
    })


def decode_response(version, data, strict=True):
    """EndTxnResponse(throttle_time_ms, error_code, producer_id, producer_epoch)."""
    return API.decode_response(version, data, strict)
