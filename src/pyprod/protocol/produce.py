"""Produce (key 0), v3..v11; v3 is the first with record batch v2, v9+ flexible, v10+ responses
carry tagged current_leader / node_endpoints (KIP-951).

The schemas, for the API's versions, for decode_response() and for brokers in tests (the generic
Struct codec). The producer writes request bodies with kcore.encode_produce_body and reads
responses with kcore.decode_produce_response, the one codec of that hot path.
(v12 is wire-identical to v11 but changes transaction semantics; v13 keys topics by id.)
"""
from .schema import Api, Field, Struct

PartitionData = Struct("PartitionProduceData", [
    Field("index", "int32"),
    Field("records", "records"),
])
TopicData = Struct("TopicProduceData", [
    Field("name", "string", "0-12"),
    Field("partition_data", "[]", fields=PartitionData),
])
REQUEST = Struct("ProduceRequest", [
    Field("transactional_id", "string", "3+", nullable="3+", default=None),
    Field("acks", "int16"),
    Field("timeout_ms", "int32"),
    Field("topic_data", "[]", fields=TopicData),
])

BatchIndexAndErrorMessage = Struct("BatchIndexAndErrorMessage", [
    Field("batch_index", "int32", "8+"),
    Field("batch_index_error_message", "string", "8+", nullable="8+", default=None),
])
LeaderIdAndEpoch = Struct("LeaderIdAndEpoch", [
    Field("leader_id", "int32", "10+", default=-1),
    Field("leader_epoch", "int32", "10+", default=-1),
])
PartitionResponse = Struct("PartitionProduceResponse", [
    Field("index", "int32"),
    Field("error_code", "int16"),
    Field("base_offset", "int64"),
    Field("log_append_time_ms", "int64", "2+", default=-1),
    Field("log_start_offset", "int64", "5+", default=-1),
    Field("record_errors", "[]", "8+", fields=BatchIndexAndErrorMessage),
    Field("error_message", "string", "8+", nullable="8+", default=None),
    Field("current_leader", "struct", "10+", tag=0, fields=LeaderIdAndEpoch),
])
TopicResponse = Struct("TopicProduceResponse", [
    Field("name", "string", "0-12"),
    Field("partition_responses", "[]", fields=PartitionResponse),
])
NodeEndpoint = Struct("NodeEndpoint", [
    Field("node_id", "int32", "10+"),
    Field("host", "string", "10+"),
    Field("port", "int32", "10+"),
    Field("rack", "string", "10+", nullable="10+", default=None),
])
RESPONSE = Struct("ProduceResponse", [
    Field("responses", "[]", fields=TopicResponse),
    Field("throttle_time_ms", "int32", "1+"),
    Field("node_endpoints", "[]", "10+", tag=0, fields=NodeEndpoint),
])

API = Api(0, "Produce", 3, 11, 9, REQUEST, RESPONSE)
API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = API.key, API.min_version, API.max_version, \
    API.flexible_from


def expects_response(acks):
    """acks=0 requests get no response at all."""
    return acks != 0


def decode_response(version, data, strict=True):
    """ProduceResponse(responses, throttle_time_ms, node_endpoints).

    responses: TopicProduceResponse(name, partition_responses) with PartitionProduceResponse(
    index, error_code, base_offset, log_append_time_ms, log_start_offset, record_errors,
    error_message, current_leader); current_leader is a LeaderIdAndEpoch or None.
    """
    return API.decode_response(version, data, strict)

