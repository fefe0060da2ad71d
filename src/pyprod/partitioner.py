"""Partitioning, as the Java client's BuiltInPartitioner does it.

- An explicit partition wins.
- A keyed record goes to ``(murmur2(key) & 0x7fffffff) % num_partitions``, identical to Java.
- A null-key record uses the uniform sticky partitioner (KIP-794): it sticks to one partition until
  about ``batch_size`` bytes went there and that partition's batches are full, then moves to
  another partition, chosen at random among those with a leader.
- A custom ``partitioner`` (kafka-python style) is asked instead: an object with
  ``partition(topic, key, serialized_key, value, serialized_value, cluster)`` (3.x), or a callable
  ``f(serialized_key, all_partitions, available_partitions)`` (2.x). One with ``on_new_batch``
  gets KIP-480 behaviour: it is told when a null-key record would start a new batch.
"""
import random

import kcore


class StickyPartitionInfo:
    """The current sticky partition of one topic and the bytes produced to it."""
    __slots__ = ("partition", "produced")

    def __init__(self, partition):
        self.partition = partition
        self.produced = 0


class BuiltInPartitioner:
    def __init__(self, batch_size, rng=None):
        self.sticky_batch_size = max(batch_size, 1)
        self._sticky = {}
        self._rng = rng or random.Random()

    def sticky_partition(self, topic, cluster):
        info = self._sticky.get(topic)
        if info is None:
            info = self._sticky[topic] = StickyPartitionInfo(self._next(topic, cluster, None))
        return info.partition

    def update(self, topic, partition, appended_bytes, enable_switch, cluster):
        """After an append: count bytes; switch once enough went there and its batches are full."""
        info = self._sticky.get(topic)
        if info is None or info.partition != partition:
            return
        info.produced += appended_bytes
        if info.produced >= self.sticky_batch_size and enable_switch:
            info.partition = self._next(topic, cluster, partition)
            info.produced = 0

    def _next(self, topic, cluster, previous):
        available = cluster.available_partitions_for_topic(topic)
        pool = sorted(available) if available else sorted(cluster.partitions_for_topic(topic))
        if len(pool) > 1 and previous in pool:
            pool.remove(previous)
        return pool[self._rng.randrange(len(pool))]


def keyed_partition(serialized_key, num_partitions):
    return kcore.partition_for_key(bytes(serialized_key), num_partitions)


def custom_partition(partitioner, topic, key, serialized_key, value, serialized_value, cluster):
    """Ask a user partitioner, kafka-python 3.x object or 2.x callable."""
    method = getattr(partitioner, "partition", None)
    if method is not None:
        return method(topic, key, serialized_key, value, serialized_value, cluster)
    all_partitions = sorted(cluster.partitions_for_topic(topic))
    available = sorted(cluster.available_partitions_for_topic(topic) or ())
    return partitioner(serialized_key, all_partitions, available)
