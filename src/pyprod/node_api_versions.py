"""NodeApiVersions: the ApiVersions exchange that opens every connection, without I/O (Java's
NetworkClient.handleApiVersionsResponse; the ranges it yields are Java's NodeApiVersions).

The client asks FIRST_VERSION. A broker that does not support it answers UNSUPPORTED_VERSION
in a v0 body naming the ApiVersions versions it has: the client steps down to the highest of
those below the one it asked (else v0), and v0 refused ends the connection. negotiate() turns
one reply into what comes next; whatever the reply holds, it either says that or raises a typed
error (KafkaProtocolError for a body that does not decode).
"""
import logging

from pyprod import errors
from pyprod.connection import decoded
from pyprod.protocol import api_versions, init_producer_id, produce

log = logging.getLogger(__name__)

__all__ = ["FIRST_VERSION", "OLDEST_SUPPORTED", "negotiate"]

FIRST_VERSION = min(3, api_versions.MAX_VERSION)  # what we ask first
_UNSUPPORTED = errors.UnsupportedVersionError.errno
OLDEST_SUPPORTED = "0.11.0"  # Produce v3: record batches (magic v2), headers, idempotence
# the newest Produce version -> the Kafka line that has it, for brokers pyprod cannot write to
# (ApiVersions is 0.10.0+: an older broker closes the connection instead)
_PRODUCE_LINES = {0: "0.10.x or older", 1: "0.10.x or older", 2: "0.10.x"}


def _refuse_too_old(node_id, ranges):
    """IncompatibleBrokerVersion naming the broker's line and the oldest supported for a broker
    before 0.11: its Produce versions all predate record batches and it has no InitProducerId
    (0.11's). A broker with one but not the other (a mock) fails later, per request."""
    theirs = ranges.get(produce.API_KEY)
    if theirs is not None and theirs[1] < produce.MIN_VERSION and \
            init_producer_id.API_KEY not in ranges:
        raise errors.IncompatibleBrokerVersion(
            "node %s is too old for pyprod: Produce v%d max (Apache Kafka %s); pyprod needs "
            "Produce v%d, Apache Kafka %s or newer"
            % (node_id, theirs[1], _PRODUCE_LINES.get(theirs[1], "?"), produce.MIN_VERSION,
               OLDEST_SUPPORTED))


def _step_down(node_id, requested, theirs):
    """The version to ask after UNSUPPORTED_VERSION to ``requested``; raises below v0."""
    if requested == 0:
        raise errors.UnsupportedVersionError("node %s refused ApiVersions v0" % (node_id,))
    retry = min(theirs[1], api_versions.MAX_VERSION) if theirs else 0
    if not 0 <= retry < requested:  # the broker names nothing usable below what we asked
        retry = 0
    log.debug("Node %s does not support ApiVersions v%d; retrying with v%d",
              node_id, requested, retry)
    return retry


def negotiate(node_id, requested, body):
    """(version, None, None): ask ApiVersions again at that version; (None, ranges, features):
    the broker's {api_key: (min, max)} and (finalized features epoch, {name: max level}).
    Raises a typed KafkaError when the connection cannot go on."""
    try:
        resp = decoded("an ApiVersions v%d response" % requested, api_versions.decode_response,
                       requested, body)
    except errors.KafkaProtocolError:
        # UNSUPPORTED_VERSION in a body we can't decode (librdkafka's mock cluster writes
        # neither v0 nor the requested version): step down to v0 all the same.
        if requested > 0 and len(body) >= 2 and \
                int.from_bytes(body[:2], "big", signed=True) == _UNSUPPORTED:
            log.debug("Node %s: undecodable UNSUPPORTED_VERSION answer to ApiVersions v%d",
                      node_id, requested)
            return 0, None, None
        raise
    ranges = api_versions.version_ranges(resp)
    if resp.error_code == _UNSUPPORTED:
        return _step_down(node_id, requested, ranges.get(api_versions.API_KEY)), None, None
    if resp.error_code:
        raise errors.for_code(resp.error_code)(
            "ApiVersions request to node %s failed" % (node_id,))
    _refuse_too_old(node_id, ranges)
    return None, ranges, (resp.finalized_features_epoch, api_versions.finalized_features(resp))
