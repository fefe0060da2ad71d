"""send()'s record checks and the user partitioner, the same in both implementations (see
kcore/___init__.py): serialized key/value and header checks, the error for a topic not in
the metadata, and the call of a kafka-python style ``partitioner``."""
from kcore.errors import IllegalStateError, KafkaTimeoutError

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
    return KafkaTimeoutError("Partition %d of topic %s not present in metadata"
                             % (partition, topic))


def custom_partition(partitioner, topic, key, serialized_key, value, serialized_value, cluster):
    """The partition a user ``partitioner`` gives: an object with
    ``partition(topic, key, serialized_key, value, serialized_value, cluster)`` (kafka-python
    3.x), or a callable ``f(serialized_key, all_partitions, available_partitions)`` (2.x)."""
    method = getattr(partitioner, "partition", None)
    if method is not None:
        return method(topic, key, serialized_key, value, serialized_value, cluster)
    all_partitions = sorted(cluster.partitions_for_topic(topic))
    available = sorted(cluster.available_partitions_for_topic(topic) or ())
    return partitioner(serialized_key, all_partitions, available)


def _forked_error():
    return IllegalStateError(
        "This KafkaProducer was created in the parent process and cannot be used after "
        "fork(): create a new KafkaProducer in the child process.")
