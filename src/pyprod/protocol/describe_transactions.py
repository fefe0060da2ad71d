"""DescribeTransactions (key 65, KIP-664, Kafka 3.0+), v0, flexible; sent to the transactional
id's transaction coordinator (FindCoordinator key_type 1).

Each id gets its own error code: TRANSACTIONAL_ID_NOT_FOUND (105) for an id the coordinator
never saw (or has expired), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS /
COORDINATOR_NOT_AVAILABLE to look it up again or retry, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""
from .schema import Api, Field, Struct

REQUEST = Struct("DescribeTransactionsRequest", [
    Field("transactional_ids", "[]string"),
])
TopicData = Struct("TopicData", [
    Field("topic", "string"),
    Field("partitions", "[]int32"),
])
TransactionState = Struct("TransactionState", [
    Field("error_code", "int16"),
    Field("transactional_id", "string"),
    Field("transaction_state", "string"),   # "Empty", "Ongoing", "CompleteCommit", ...
    Field("transaction_timeout_ms", "int32"),
    Field("transaction_start_time_ms", "int64"),
    Field("producer_id", "int64"),
    Field("producer_epoch", "int16"),
    Field("topics", "[]", fields=TopicData),
])
RESPONSE = Struct("DescribeTransactionsResponse", [
    Field("throttle_time_ms", "int32"),
    Field("transaction_states", "[]", fields=TransactionState),
])

API = Api(65, "DescribeTransactions", 0, 0, 0, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_ids):
    """``transactional_ids``: an iterable of str (one str is refused: it is not a list)."""
    if isinstance(transactional_ids, (str, bytes)):
        raise TypeError("transactional_ids must be a list of str, not a single %s"
                        % type(transactional_ids).__name__)
    return API.encode_request(version, {"transactional_ids": list(transactional_ids)})


def decode_response(version, data, strict=True):
    """DescribeTransactionsResponse(throttle_time_ms, transaction_states)."""
    return API.decode_response(version, data, strict)


def state_of(response, transactional_id):
    """The TransactionState of ``transactional_id`` in a response (KeyError if absent)."""
    for state in response.transaction_states:
        if state.transactional_id == transactional_id:
            return state
    raise KeyError("no state for transactional id %r in the response" % (transactional_id,))
