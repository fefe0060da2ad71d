"""AddOffsetsToTxn (key 25), v0..v4; v3+ flexible. v1-v4 change only the errors the broker
may answer (v2 PRODUCER_FENCED, v4 TRANSACTION_ABORTABLE). Transactions v2 (KIP-890) skip this
call: TxnOffsetCommit v5 adds the group's offsets partition itself."""
from .schema import Api, Field, Struct

REQUEST = Struct("AddOffsetsToTxnRequest", [
    Field("transactional_id", "string"),
    Field("producer_id", "int64"),
    Field("producer_epoch", "int16"),
    Field("group_id", "string"),
])
RESPONSE = Struct("AddOffsetsToTxnResponse", [
    Field("throttle_time_ms", "int32"),
    Field("error_code", "int16"),
])

API = Api(25, "AddOffsetsToTxn", 0, 4, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_id, producer_id, producer_epoch, group_id):
    return API.encode_request(version, {
        "transactional_id": transactional_id,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "group_id": group_id,
    })


def decode_response(version, data, strict=True):
    """AddOffsetsToTxnResponse(throttle_time_ms, error_code)."""
    return API.decode_response(version, data, strict)
