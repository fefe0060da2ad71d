"""MetadataUpdater: Java's DefaultMetadataUpdater, the NetworkClient's metadata requests.

NetworkPoll.poll() asks maybe_update(poll, now) first: when Metadata says an update is due, it
sends a MetadataRequest to the least loaded node (connecting to one if none is ready) and says
how long poll may sleep. The answer comes back through handle_response(); a request lost with
its connection through request_failed(). One request is in flight at a time. A reply that does
not decode closes its connection (KafkaProtocolError) and counts as a failed update, so the next
try waits for the refresh backoff. It holds the Metadata and the ConnectionLifecycle (which
picks and connects the node), never the NetworkPoll: that comes as an argument.
"""
import logging

from pyprod import errors
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.connection import DISCONNECTED, MAX_DELAY_MS, SETTING_UP, decoded
from pyprod.protocol import api_versions
from pyprod.protocol import metadata as metadata_api

log = logging.getLogger(__name__)

__all__ = ["MetadataUpdater", "cluster_from_response"]


class MetadataUpdater:
    def __init__(self, metadata, lifecycle, internal_tag, allow_auto_create_topics):
        self.metadata = metadata
        self.lifecycle = lifecycle  # ConnectionLifecycle: the least loaded node, connecting
        self._tag = internal_tag   # InFlightRequest.internal of the client's metadata requests
        self.fetch = None         # (node_id, request_version) while a request is in flight
        self._auto_create = bool(allow_auto_create_topics)

    @property
    def in_flight(self):
        return self.fetch is not None

    def update_due(self, now):
        """A metadata request is due and not in flight."""
        return self.fetch is None and self.metadata.update_due_ms <= now

    def maybe_update(self, poll, now):
        """Send a MetadataRequest if one is due; returns ms until the next metadata action."""
        if self.fetch is not None:
            return MAX_DELAY_MS  # the response (or its timeout) will wake poll
        wait = self.metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        lifecycle = self.lifecycle
        node = lifecycle.least_loaded_node(poll, now)
        if node is None:
            delays = [lifecycle.connection_delay(poll, n, now)
                      for n in self.metadata.cluster.node_ids()]
            return max(1, min(delays, default=lifecycle.reconnect_backoff_ms))
        connection = poll.connections.get(node)
        if poll.can_send(connection):
            self._send(poll, connection, now)
            return MAX_DELAY_MS
        if any(c.state in SETTING_UP for c in poll.connections.values()):
            return lifecycle.reconnect_backoff_ms  # let that connection finish first
        if lifecycle.connect_if_allowed(poll, node, now):
            return lifecycle.reconnect_backoff_ms
        return MAX_DELAY_MS

    def _send(self, poll, connection, now):
        try:
            version = api_versions.pick_version(metadata_api, connection.api_versions)
        except errors.UnsupportedVersionError as e:
            self.metadata.failed_update(now)
            poll.close(connection, e, now, request_update=False)
            return
        topics, request_version = self.metadata.metadata_request(now)
        if version == 0 and not topics:
            body = metadata_api.encode_request(0, None)  # v0 cannot ask for no topics
        else:
            body = metadata_api.encode_request(version, topics,
                                               allow_auto_topic_creation=self._auto_create)
        self.fetch = (connection.node_id, request_version)
        log.debug("Sending metadata request v%d for %s to node %s", version, topics,
                  connection.node_id)
        poll.enqueue(connection, metadata_api.API_KEY, version, body, True, None,
                     poll.request_timeout_ms, now, self._tag)

    def request_failed(self, now):
        """The request in flight was lost (its connection closed or it timed out)."""
        self.fetch = None
        self.metadata.failed_update(now)

    def handle_response(self, poll, connection, req, body, now):
        request_version = self.fetch[1] if self.fetch else None
        self.fetch = None
        try:
            resp = decoded("a Metadata v%d response" % req.api_version,
                           metadata_api.decode_response, req.api_version, body,
                           strict=False)  # as Java
            cluster = decoded("a Metadata response", cluster_from_response, resp)
        except errors.KafkaProtocolError as e:
            self.metadata.failed_update(now)
            poll.close(connection, e, now)
            return
        if resp.error_code:
            log.warning("Metadata request to node %s failed: %s", connection.node_id,
                        errors.for_code(resp.error_code).__name__)
            self.metadata.failed_update(now)
            return
        if not resp.brokers:
            log.debug("Ignoring metadata response with no brokers from node %s",
                      connection.node_id)
            self.metadata.failed_update(now)
            return
        if cluster.topic_errors:
            log.debug("Metadata topic errors: %s", {
                t: e.__name__ for t, e in cluster.topic_errors.items()})
        self.metadata.update(cluster, now, request_version)
        _drop_bootstrap_connections(poll, cluster, now)


def _drop_bootstrap_connections(poll, cluster, now):
    """Real metadata arrived: close the bootstrap connections it does not name."""
    for node_id, connection in list(poll.connections.items()):
        if node_id < 0 and cluster.broker_metadata(node_id) is None:
            if not connection.in_flight and connection.sock is not None:
                poll.close(connection, None, now, request_update=False)
            if connection.state == DISCONNECTED:
                del poll.connections[node_id]


def cluster_from_response(resp):
    """A Cluster from a decoded MetadataResponse. Partition indexes outside 0..n-1 (n: the
    topic's distinct indexes) are dropped: a producer would size tables by them."""
    brokers = {b.node_id: Broker(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
    topics, topic_errors, unauthorized, invalid, internal = {}, {}, set(), set(), set()
    for t in resp.topics:
        name = t.name
        if name is None:
            continue
        if t.error_code:
            err = errors.for_code(t.error_code)
            topic_errors[name] = err
            if err is errors.TopicAuthorizationFailedError:
                unauthorized.add(name)
            elif err is errors.InvalidTopicError:
                invalid.add(name)
            if not t.partitions:
                continue
        if t.is_internal:
            internal.add(name)
        parts = {}
        count = len({p.partition_index for p in t.partitions})
        for p in t.partitions:
            if not 0 <= p.partition_index < count:
                continue  # a topic's partitions are 0..n-1: anything else is not a partition
            leader = p.leader_id if p.leader_id in brokers else -1
            parts[p.partition_index] = PartitionInfo(
                name, p.partition_index, leader, p.leader_epoch, tuple(p.replica_nodes),
                tuple(p.isr_nodes), tuple(p.offline_replicas or ()))
        topics[name] = parts
    controller = resp.controller_id if resp.controller_id is not None and \
        resp.controller_id >= 0 else None
    return Cluster(brokers, topics, cluster_id=resp.cluster_id, controller_id=controller,
                   unauthorized_topics=unauthorized, invalid_topics=invalid,
                   topic_errors=topic_errors, internal_topics=internal)
