"""Cluster: an immutable snapshot of cluster metadata (Java's Cluster).

A new Cluster is built for every metadata update and swapped in whole, so readers in other threads
never see a half-updated view. The read methods are kafka-python ClusterMetadata's, because custom
partitioners receive this object.
"""
import collections


class Broker(collections.namedtuple("Broker", ["node_id", "host", "port", "rack"])):
    """One broker (kafka-python's BrokerMetadata; ``nodeId`` is kept as an alias)."""
    __slots__ = ()

    @property
    def nodeId(self):
        return self.node_id


class PartitionInfo(collections.namedtuple("PartitionInfo", [
        "topic", "partition", "leader", "leader_epoch", "replicas", "isr", "offline"])):
    """One partition: leader is -1 when there is none (``leader_id`` alias as kafka-python 3)."""
    __slots__ = ()

    @property
    def leader_id(self):
        return self.leader


def _partition_of(tp):
    try:
        topic, partition = tp
    except (TypeError, ValueError):
        raise TypeError("expected a (topic, partition) pair, got %r" % (tp,)) from None
    return topic, partition


class Cluster:
    """Brokers and partitions at one point in time. Treat as read-only."""

    __slots__ = ("_brokers", "_topics", "cluster_id", "controller_id", "unauthorized_topics",
                 "invalid_topics", "internal_topics", "topic_errors", "is_bootstrap",
                 "_available", "_by_node")

    def __init__(self, brokers, topics, cluster_id=None, controller_id=None,
                 unauthorized_topics=(), invalid_topics=(), topic_errors=None,
                 internal_topics=(), is_bootstrap=False):
        self._brokers = dict(brokers)
        self._topics = {t: dict(parts) for t, parts in topics.items()}
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.unauthorized_topics = frozenset(unauthorized_topics)
        self.invalid_topics = frozenset(invalid_topics)
        self.internal_topics = frozenset(internal_topics)
        self.topic_errors = dict(topic_errors or {})
        self.is_bootstrap = is_bootstrap
        self._available = {
            t: frozenset(p for p, info in parts.items() if info.leader >= 0)
            for t, parts in self._topics.items()}
        by_node = collections.defaultdict(set)
        for t, parts in self._topics.items():
            for p, info in parts.items():
                if info.leader >= 0:
                    by_node[info.leader].add((t, p))
        self._by_node = dict(by_node)

    @classmethod
    def empty(cls):
        return cls({}, {})

    @classmethod
    def bootstrap(cls, addresses):
        """Bootstrap servers as fake brokers with node ids -1, -2, ... (Java)."""
        brokers = {}
        for i, (host, port) in enumerate(addresses):
            brokers[-(i + 1)] = Broker(-(i + 1), host, int(port), None)
        return cls(brokers, {}, is_bootstrap=True)

    # -- kafka-python ClusterMetadata read API --

    def topics(self, exclude_internal_topics=True):
        names = set(self._topics)
        return names - self.internal_topics if exclude_internal_topics else names

    def brokers(self):
        """All brokers (a set of Broker, as kafka-python 2.x)."""
        return set(self._brokers.values())

    def broker_metadata(self, node_id):
        return self._brokers.get(node_id)

    def node_ids(self):
        return list(self._brokers)

    def partitions_for_topic(self, topic):
        parts = self._topics.get(topic)
        return None if parts is None else set(parts)

    def available_partitions_for_topic(self, topic):
        avail = self._available.get(topic)
        return None if avail is None else set(avail)

    def partition_count(self, topic):
        parts = self._topics.get(topic)
        return None if parts is None else len(parts)

    def leader_for_partition(self, tp):
        """Leader node id, -1 if there is none, None if the partition is unknown."""
        topic, partition = _partition_of(tp)
        parts = self._topics.get(topic)
        if parts is None:
            return None
        info = parts.get(partition)
        return None if info is None else info.leader

    def leader_epoch_for_partition(self, tp):
        topic, partition = _partition_of(tp)
        info = self._topics.get(topic, {}).get(partition)
        return None if info is None else info.leader_epoch

    def partition_info(self, tp):
        topic, partition = _partition_of(tp)
        return self._topics.get(topic, {}).get(partition)

    def partitions_info_for_topic(self, topic):
        """{partition: PartitionInfo} or None."""
        parts = self._topics.get(topic)
        return None if parts is None else dict(parts)

    def partitions_for_broker(self, node_id):
        """{(topic, partition)} led by node_id, None if it leads none."""
        parts = self._by_node.get(node_id)
        return None if parts is None else set(parts)

    def __repr__(self):
        return "Cluster(brokers=%d, topics=%d, cluster_id=%r%s)" % (
            len(self._brokers), len(self._topics), self.cluster_id,
            ", bootstrap" if self.is_bootstrap else "")
