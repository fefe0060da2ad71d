"""BuiltInPartitioner: Java's partitioner for records without a partition (KIP-794).

Keyed records go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` (``partition_for_key``,
kcore.murmur). Null-key records go to the topic's sticky partition: one partition, picked at
random among those with a leader, until about ``batch_size`` bytes went to it and the batch
being filled there is full (KIP-480's "switch on a new batch"), then another one. The
RecordAccumulator keeps one per topic (in its TopicInfo); send() and send_batch() both place
null-key records through it.
"""
import random

from kcore.pure.murmur import partition_for_key  # noqa: F401 (the key rule, for the callers)

__all__ = ["BuiltInPartitioner"]

_MASK64 = (1 << 64) - 1


class BuiltInPartitioner:
    """The sticky partition of one topic and the bytes produced to it since it was chosen."""
    __slots__ = ("topic", "sticky_batch_size", "num_partitions", "available", "sticky",
                 "produced", "_rng")

    def __init__(self, topic, sticky_batch_size, seed=None):
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self.num_partitions = 0
        self.available = []
        self.sticky = -1
        self.produced = 0
        if seed is None:
            seed = random.getrandbits(64)
        self._rng = (seed & _MASK64) | 1  # xorshift64 state, as the compiled twin keeps it

    def update_partitions(self, available, num_partitions):
        """New metadata: the partitions with a leader (sorted) and the partition count."""
        self.available = available
        self.num_partitions = num_partitions
        if self.sticky >= num_partitions:
            self.sticky = -1

    def sticky_partition(self):
        """The sticky partition, chosen now if there is none (Java's peekCurrentPartitionInfo)."""
        part = self.sticky  # read once: another thread's update may reset it meanwhile
        if part < 0:
            part = self.sticky = self.next_partition()
        return part

    def next_partition(self):
        """A random partition with a leader other than the current one (any if none has)."""
        pool = [p for p in self.available if p != self.sticky] or self.available or \
            list(range(self.num_partitions))
        return pool[self._next_random() % len(pool)]

    def _next_random(self):
        """xorshift64, the compiled twin's generator: a seed picks the same partitions in both."""
        x = self._rng
        x ^= (x << 13) & _MASK64
        x ^= x >> 7
        x ^= (x << 17) & _MASK64
        self._rng = x
        return x

    def add_produced(self, partition, appended_bytes):
        """Count bytes appended to partition; True once the sticky partition is due to change
        (sticky_batch_size bytes went to it)."""
        if partition != self.sticky:
            return False
        self.produced += appended_bytes
        return self.produced >= self.sticky_batch_size

    def switch_from(self, partition):
        """Move on from partition if it is still the sticky one; True if it was."""
        if partition != self.sticky:
            return False
        self.sticky = self.next_partition()
        self.produced = 0
        return True

    def update_partition_info(self, partition, appended_bytes, enable_switch):
        """After an append (Java's updatePartitionInfo): switch once sticky_batch_size bytes
        went to the partition and enable_switch (its batches are full)."""
        if self.add_produced(partition, appended_bytes) and enable_switch:
            self.switch_from(partition)
