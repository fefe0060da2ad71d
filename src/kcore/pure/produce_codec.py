"""ProduceRequest bodies and ProduceResponse results for the Sender (Java's ProduceRequest /
ProduceResponse), v3..v11.

encode_produce_body(version, acks, timeout_ms, transactional_id, batches) returns the request
body (no header, no size) as a list of bytes-like pieces; batches are (topic, partition,
payload) with topics grouped in first-seen order. The compiled twin leaves each payload in the
list as given (written with writev, never copied); this twin returns one bytes object.

decode_produce_response(version, body) returns (results, throttle_time_ms), one flat tuple per
partition: (topic, partition, error_code, base_offset, log_append_time_ms, log_start_offset,
error_message, record_errors), record_errors being a tuple of (batch_index, message). Tagged
fields (KIP-951's current_leader / node_endpoints) are skipped; bytes after the message are
ignored, as the Java client does. Anything malformed raises KafkaProtocolError.
"""
from pyprod.protocol import produce
from pyprod.protocol.wire import as_reader

__all__ = ["encode_produce_body", "decode_produce_response"]


def encode_produce_body(version, acks, timeout_ms, transactional_id, batches):
    return [produce.encode_request(version, acks, timeout_ms, produce.group_batches(batches),
                                   transactional_id)]


def decode_produce_response(version, body):
    produce.API.check(version)
    flexible = version >= produce.FLEXIBLE_FROM
    r = as_reader(body)
    results = []
    for _ in range(r.read_array_len(flexible)):
        topic = r.read_string(flexible)
        for _ in range(r.read_array_len(flexible)):
            partition, error_code, base_offset = r.read_int32(), r.read_int16(), r.read_int64()
            log_append_time = r.read_int64()  # v2+
            log_start_offset = r.read_int64() if version >= 5 else -1
            record_errors, message = (), None
            if version >= 8:
                record_errors = tuple(_record_errors(r, flexible))
                message = r.read_string(flexible, nullable=True)
            if flexible:
                r.read_tagged_fields()
            results.append((topic, partition, error_code, base_offset, log_append_time,
                            log_start_offset, message, record_errors))
        if flexible:
            r.read_tagged_fields()
    throttle_time_ms = r.read_int32()
    if flexible:
        r.read_tagged_fields()
    return results, throttle_time_ms


def _record_errors(r, flexible):
    for _ in range(r.read_array_len(flexible)):
        index, message = r.read_int32(), r.read_string(flexible, nullable=True)
        if flexible:
            r.read_tagged_fields()
        yield index, message
