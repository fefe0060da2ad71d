"""Produce (key 0), v3..v11; v3 is the first with record batch v2, v9+ flexible, v10+ responses
carry tagged current_leader / node_endpoints (KIP-951).

Record batches are passed through as given (bytes, bytearray or memoryview): the frame builders
copy each batch once into the frame, or not at all with encode_request_buffers().
(v12 is wire-identical to v11 but changes transaction semantics; v13 keys topics by id.)
"""
from .header import request_writer
from .wire import Api, Field, Struct, Writer

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


def _items(x):
    return list(x.items()) if isinstance(x, dict) else list(x)


def _write_body(w, version, acks, timeout_ms, topic_data, transactional_id):
    if acks not in (-1, 0, 1):
        raise ValueError("acks must be -1 (all), 0 or 1, got %r" % (acks,))
    flexible = version >= FLEXIBLE_FROM
    w.write_string(transactional_id, flexible, True)
    w.write_int16(acks)
    w.write_int32(timeout_ms)
    topic_data = _items(topic_data)
    w.write_array_len(len(topic_data), flexible)
    for topic, partitions in topic_data:
        partitions = _items(partitions)
        w.write_string(topic, flexible)
        w.write_array_len(len(partitions), flexible)
        for partition, records in partitions:
            w.write_int32(partition)
            w.write_records(records, flexible)
            if flexible:
                w.write_tagged_fields()
        if flexible:
            w.write_tagged_fields()
    if flexible:
        w.write_tagged_fields()


def encode_request(version, acks, timeout_ms, topic_data, transactional_id=None):
    """Request body. topic_data: [(topic, [(partition, batch)])] (or dicts in place of lists)."""
    API.check(version)
    w = Writer()
    _write_body(w, version, acks, timeout_ms, topic_data, transactional_id)
    return w.getvalue()


def group_batches(batches):
    """[(topic, partition, batch)] -> [(topic, [(partition, batch)])], topics in first-seen
    order."""
    topics = {}
    for topic, partition, batch in batches:
        topics.setdefault(topic, []).append((partition, batch))
    return list(topics.items())


def _frame(version, correlation_id, client_id, acks, timeout_ms, batches, transactional_id,
           zero_copy_min):
    w = request_writer(API, version, correlation_id, client_id, zero_copy_min)
    _write_body(w, version, acks, timeout_ms, group_batches(batches), transactional_id)
    return w.finish()


def encode_request_frame(version, correlation_id, client_id, acks, timeout_ms, batches,
                         transactional_id=None):
    """Whole request (size prefix, header, body) as bytes, each batch copied once.

    batches: iterable of (topic, partition, batch bytes).
    """
    return b"".join(_frame(version, correlation_id, client_id, acks, timeout_ms, batches,
                           transactional_id, 0).buffers())


def encode_request_buffers(version, correlation_id, client_id, acks, timeout_ms, batches,
                           transactional_id=None, zero_copy_min=4096):
    """Same frame as a list of buffers for ``socket.sendmsg``; batches of at least
    ``zero_copy_min`` bytes are referenced, not copied (they must not change until sent)."""
    return _frame(version, correlation_id, client_id, acks, timeout_ms, batches,
                  transactional_id, zero_copy_min).buffers()


def decode_response(version, data, strict=True):
    """ProduceResponse(responses, throttle_time_ms, node_endpoints).

    responses: TopicProduceResponse(name, partition_responses) with PartitionProduceResponse(
    index, error_code, base_offset, log_append_time_ms, log_start_offset, record_errors,
    error_message, current_leader); current_leader is a LeaderIdAndEpoch or None.
    """
    return API.decode_response(version, data, strict)


def partition_results(response):
    """Yield (topic, PartitionProduceResponse) for every partition in a response."""
    for topic in response.responses:
        for p in topic.partition_responses:
            yield topic.name, p
