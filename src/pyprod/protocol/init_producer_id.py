"""InitProducerId (key 22), v0..v5; v2+ flexible, v3+ sends the current producer id/epoch."""
from .schema import Api, Field, Struct

REQUEST = Struct("InitProducerIdRequest", [
    Field("transactional_id", "string", nullable="0+", default=None),
    Field("transaction_timeout_ms", "int32"),
    Field("producer_id", "int64", "3+", default=-1),
    Field("producer_epoch", "int16", "3+", default=-1),
])
RESPONSE = Struct("InitProducerIdResponse", [
    Field("throttle_time_ms", "int32"),
    Field("error_code", "int16"),
    Field("producer_id", "int64", default=-1),
    Field("producer_epoch", "int16"),
])

API = Api(22, "InitProducerId", 0, 5, 2, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_id=None, transaction_timeout_ms=60000,
                   producer_id=-1, producer_epoch=-1):
    """producer_id/epoch (v3+) let a producer keep its id after INVALID_PRODUCER_EPOCH."""
    return API.encode_request(version, {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": transaction_timeout_ms,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
    })


def decode_response(version, data, strict=True):
    """InitProducerIdResponse(throttle_time_ms, error_code, producer_id, producer_epoch)."""
    return API.decode_response(version, data, strict)
