"""TxnOffsetCommit (key 28), v0..v5; v3+ flexible.

v2 adds each partition's committed_leader_epoch, v3 the consumer's group metadata (KIP-447:
generation_id, member_id, group_instance_id). v4 and v5 have v3's layout: v5 is transactions
v2 (KIP-890 part 2), sent to the group coordinator without an AddOffsetsToTxn first.
"""
from .schema import Api, Field, Struct

RequestPartition = Struct("TxnOffsetCommitRequestPartition", [
    Field("partition_index", "int32"),
    Field("committed_offset", "int64"),
    Field("committed_leader_epoch", "int32", "2+", default=-1),
    Field("committed_metadata", "string", nullable="0+", default=None),
])
RequestTopic = Struct("TxnOffsetCommitRequestTopic", [
    Field("name", "string"),
    Field("partitions", "[]", fields=RequestPartition),
])
REQUEST = Struct("TxnOffsetCommitRequest", [
    Field("transactional_id", "string"),
    Field("group_id", "string"),
    Field("producer_id", "int64"),
    Field("producer_epoch", "int16"),
    Field("generation_id", "int32", "3+", default=-1),
    Field("member_id", "string", "3+", default=""),
    Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    Field("topics", "[]", fields=RequestTopic),
])
ResponsePartition = Struct("TxnOffsetCommitResponsePartition", [
    Field("partition_index", "int32"),
    Field("error_code", "int16"),
])
ResponseTopic = Struct("TxnOffsetCommitResponseTopic", [
    Field("name", "string"),
    Field("partitions", "[]", fields=ResponsePartition),
])
RESPONSE = Struct("TxnOffsetCommitResponse", [
    Field("throttle_time_ms", "int32"),
    Field("topics", "[]", fields=ResponseTopic),
])

API = Api(28, "TxnOffsetCommit", 0, 5, 3, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def encode_request(version, transactional_id, group_id, producer_id, producer_epoch, offsets,
                   generation_id=-1, member_id="", group_instance_id=None):
    """``offsets``: {(topic, partition): (offset, metadata or None, leader epoch or -1)},
    sent grouped by topic, sorted. The leader epoch is dropped below v2; group metadata other
    than the defaults raises ValueError below v3 (as Java's builder does)."""
    if version < 3 and (generation_id != -1 or member_id != "" or group_instance_id is not None):
        raise ValueError("TxnOffsetCommit v%d cannot carry the group metadata (needs v3+)"
                         % version)
    topics = {}
    for (topic, partition), (offset, metadata, leader_epoch) in sorted(offsets.items()):
        topics.setdefault(topic, []).append((partition, offset, leader_epoch, metadata))
    return API.encode_request(version, {
        "transactional_id": transactional_id,
        "group_id": group_id,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "generation_id": generation_id,
        "member_id": member_id,
        "group_instance_id": group_instance_id,
        "topics": [(name, parts) for name, parts in topics.items()],
    })


def decode_response(version, data, strict=True):
    """TxnOffsetCommitResponse(throttle_time_ms, topics)."""
    return API.decode_response(version, data, strict)


def partition_errors(response):
    """{(topic, partition): error_code} from a response."""
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}
