"""The RecordAccumulator's Python parts, the same in both implementations (see
kcore/___init__.py): the Sender's ReadyCheckResult, and the error for a record too large
for a request or for the buffer memory."""
import collections

from kcore.errors import KafkaError, MessageSizeTooLargeError

ReadyCheckResult = collections.namedtuple(
    "ReadyCheckResult", ["ready_nodes", "next_ready_check_delay_ms", "unknown_leader_topics"],
    module=__name__)


def _too_large(size, max_request_size, buffer_memory):
    what = ("maximum request size you have configured with the max_request_size configuration"
            if size > max_request_size else
            "total memory buffer you have configured with the buffer_memory configuration")
    return MessageSizeTooLargeError(
        "The message is %d bytes when serialized which is larger than the %s" % (size, what))


def _build_failed(exc):
    """The error a drained batch completes with when building it raised (a codec's error, no
    memory): the batch fails alone, the Sender goes on."""
    if isinstance(exc, KafkaError):
        return exc
    error = KafkaError("the batch could not be built: %s: %s" % (type(exc).__name__, exc))
    error.__cause__ = exc
    return error
