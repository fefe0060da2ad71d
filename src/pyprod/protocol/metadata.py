"""Metadata (key 3), v0..v13; v9+ flexible, v10+ topic ids, v13 top-level error code.

Request topics: None asks for every topic (v0 encodes that as an empty array, so v0 cannot ask
for no topics). Topics are names, or uuid.UUID topic ids (v10+; brokers honour them from v12).
"""
import uuid

from .schema import Api, Field, Struct

RequestTopic = Struct("MetadataRequestTopic", [
    Field("topic_id", "uuid", "10+"),
    Field("name", "string", nullable="10+"),
])
REQUEST = Struct("MetadataRequest", [
    Field("topics", "[]", nullable="1+", fields=RequestTopic),
    Field("allow_auto_topic_creation", "bool", "4+", default=True),
    Field("include_cluster_authorized_operations", "bool", "8-10"),
    Field("include_topic_authorized_operations", "bool", "8+"),
])

Broker = Struct("MetadataBroker", [
    Field("node_id", "int32"),
    Field("host", "string"),
    Field("port", "int32"),
    Field("rack", "string", "1+", nullable="1+", default=None),
])
Partition = Struct("MetadataPartition", [
    Field("error_code", "int16"),
    Field("partition_index", "int32"),
    Field("leader_id", "int32"),
    Field("leader_epoch", "int32", "7+", default=-1),
    Field("replica_nodes", "[]int32"),
    Field("isr_nodes", "[]int32"),
    Field("offline_replicas", "[]int32", "5+"),
])
_NO_OPERATIONS = -2147483648
Topic = Struct("MetadataTopic", [
    Field("error_code", "int16"),
    Field("name", "string", nullable="12+"),
    Field("topic_id", "uuid", "10+"),
    Field("is_internal", "bool", "1+"),
    Field("partitions", "[]", fields=Partition),
    Field("topic_authorized_operations", "int32", "8+", default=_NO_OPERATIONS),
])
RESPONSE = Struct("MetadataResponse", [
    Field("throttle_time_ms", "int32", "3+"),
    Field("brokers", "[]", fields=Broker),
    Field("cluster_id", "string", "2+", nullable="2+", default=None),
    Field("controller_id", "int32", "1+", default=-1),
    Field("topics", "[]", fields=Topic),
    Field("cluster_authorized_operations", "int32", "8-10", default=_NO_OPERATIONS),
    Field("error_code", "int16", "13+"),
])

API = Api(3, "Metadata", 0, 13, 9, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def _topic(t):
    if isinstance(t, uuid.UUID):
        return (t, None)
    if not isinstance(t, str):
        raise TypeError("topic must be a name (str) or a uuid.UUID topic id, got %r" % (t,))
    return (None, t)


def encode_request(version, topics=None, allow_auto_topic_creation=True,
                   include_topic_authorized_operations=False):
    if topics is None:
        if version == 0:
            topics = ()
    elif not isinstance(topics, (list, tuple)):
        raise TypeError("topics must be a list of topics or None (all topics)")
    elif not topics and version == 0:
        raise ValueError("Metadata v0 cannot ask for no topics (an empty list means all)")
    else:
        topics = [RequestTopic.type._make(_topic(t)) for t in topics]
    return API.encode_request(version, {
        "topics": topics,
        "allow_auto_topic_creation": allow_auto_topic_creation,
        "include_topic_authorized_operations": include_topic_authorized_operations,
    })


def decode_response(version, data, strict=True):
    """MetadataResponse(throttle_time_ms, brokers, cluster_id, controller_id, topics,
    cluster_authorized_operations, error_code); absent fields hold their defaults."""
    return API.decode_response(version, data, strict)
