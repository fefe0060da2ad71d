"""The record checks of send(), the same in both implementations (see kcore/shared/__init__.py):
serialized key/value and header checks, the errors for a record that is too large or whose
topic is not in the metadata, and the Sender's ReadyCheckResult."""
import collections

from pyprod.errors import KafkaTimeoutError, MessageSizeTooLargeError

ReadyCheckResult = collections.namedtuple(
    "ReadyCheckResult", ["ready_nodes", "next_ready_check_delay_ms", "unknown_leader_topics"],
    module=__name__)

_BYTES = (bytes, bytearray, memoryview)
_INT32_MAX, _INT64_MAX = (1 << 31) - 1, (1 << 63) - 1  # partition, timestamp_ms bounds


def _as_bytes(data, what):
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, _BYTES):
        return bytes(data)
    raise TypeError("Unsupported type for serialized %s: %s" % (what, type(data)))


def _check_headers(headers):
    """(headers as a list of (str, bytes|None), their serialized size or -1)."""
    if headers is None:
        return [], -1
    if not isinstance(headers, (list, tuple)):
        raise TypeError("headers must be list-type")
    out, size = [], 0
    for item in headers:
        if not (type(item) is tuple and len(item) == 2 and type(item[0]) is str
                and (item[1] is None or isinstance(item[1], _BYTES))):
            raise TypeError("All headers items must be (str, bytes) tuples, got %r" % (item,))
        k, v = item
        if v is not None and type(v) is not bytes:
            v = bytes(v)
        out.append((k, v))
        size += len(k.encode("utf-8")) + (len(v) if v is not None else 0)
    return out, (size if out else -1)


def _not_in_metadata(topic, partition):
    if partition is None:
        return KafkaTimeoutError("Topic %s not present in metadata" % topic)
    return KafkaTimeoutError("Partition %d of topic %s not present in metadata" % (partition, topic))


def _too_large(size, max_request_size, buffer_memory):
    what = ("maximum request size you have configured with the max_request_size configuration"
            if size > max_request_size else
            "total memory buffer you have configured with the buffer_memory configuration")
    return MessageSizeTooLargeError(
        "The message is %d bytes when serialized which is larger than the %s" % (size, what))
