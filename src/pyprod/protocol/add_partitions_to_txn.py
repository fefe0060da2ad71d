"""AddPartitionsToTxn (key 24), the client's versions v0..v3; v3 flexible.

v4+ (KIP-890) is broker to broker: a batch of ``transactions`` with ``verify_only`` and a top
level error code, sent by a partition leader to the transaction coordinator. Clients stop at v3
(Java's forClient() too), so MAX_VERSION is 3 and only the v0-v3 fields are declared here.
"""
from .schema import Api, Field, Struct

Topic = Struct("AddPartitionsToTxnTopic", [
    Field("name", "string"),
    Field("partitions", "[]int32"),
])
REQUEST = Struct("AddPartitionsToTxnRequest", [
    Field("transactional_id", "string", "0-3"),  # V3AndBelowTransactionalId in the schema
    Field("producer_id", "int64", "0-3"),
    Field("producer_epoch", "int16", "0-3"),
    Field("topics", "[]", "0-3", fields=Topic),
])
PartitionResult = Struct("AddPartitionsToTxnPartitionResult", [
    Field("partition_index", "int32"),
    Field("partition_error_code", "int16"),
])
TopicResult = Struct("AddPartitionsToTxnTopicResult", [
    Field("name", "string"),
    Field("results_by_partition", "[]", fields=PartitionResult),
])
RESPONSE = Struct("AddPartitionsToTxnResponse", [
    Field("throttle_time_ms", "int32"),
    Field("results_by_topic_v3_and_below", "[]", "0-3", fields=TopicResult),
])

API = Api(24, "AddPartitionsToTxn", 0, 3, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_id, producer_id, producer_epoch, partitions):
    """``partitions``: (topic, partition) pairs, sent grouped by topic, sorted, without repeats."""
    topics = {}
    for topic, partition in sorted(set(partitions)):
        topics.setdefault(topic, []).append(partition)
    return API.encode_request(version, {
        "transactional_id": transactional_id,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "topics": [(name, parts) for name, parts in topics.items()],
    })


def decode_response(version, data, strict=True):
    """AddPartitionsToTxnResponse(throttle_time_ms, results_by_topic_v3_and_below)."""
    return API.decode_response(version, data, strict)


def partition_errors(response):
    """{(topic, partition): error_code} from a response."""
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
