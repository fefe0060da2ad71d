"""BuiltInPartitioner: Java's partitioner for records without a partition (KIP-794).

Keyed records go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` (``partition_for_key``,
kcore.murmur). Null-key records go to the topic's sticky partition: one partition, picked at
random among those with a leader, until about ``batch_size`` bytes went to it and the batch
being filled there is full (KIP-480's "switch on a new batch"), then another one. The
RecordAccumulator keeps one per topic (in its TopicInfo); send() and send_batch() both place
null-key records through it.

Each caller thread has a lane: its own sticky partition and bytes produced to it, picked away
from the other lanes' sticky partitions when it can be. Threads that send at once then fill
different partitions' batches (Java's one sticky partition makes them wait on one queue's lock,
which costs a free-threaded build most). Up to LANES threads get a lane of their own; later
ones share the lane their thread ident hashes to. One thread sees exactly one sticky partition,
as before.
"""
import random
import threading

from kcore.pure.murmur import partition_for_key  # noqa: F401 (the key rule, for the callers)

__all__ = ["BuiltInPartitioner"]

_MASK64 = (1 << 64) - 1
LANES = 8


def _shared_lane(ident):
    """Fibonacci hashing: idents are aligned addresses, whose low bits are all alike."""
    return ((ident * 0x9E3779B97F4A7C15) & _MASK64) >> 61  # 3 bits: LANES


class BuiltInPartitioner:
    """The sticky partition of one topic and the bytes produced to it since it was chosen, per
    caller thread (its lane)."""
    __slots__ = ("topic", "sticky_batch_size", "num_partitions", "available", "_owner",
                 "_sticky", "_produced", "_lanes_full", "_claim_lock", "_rng")

    def __init__(self, topic, sticky_batch_size, seed=None):
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self.num_partitions = 0
        self.available = []
        self._owner = [0] * LANES      # each lane's thread ident, 0 while free
        self._sticky = [-1] * LANES
        self._produced = [0] * LANES
        self._lanes_full = False
        self._claim_lock = threading.Lock()
        if seed is None:
            seed = random.getrandbits(64)
        self._rng = (seed & _MASK64) | 1  # xorshift64 state, as the compiled twin keeps it

    @property
    def sticky(self):
        """The calling thread's sticky partition (-1: none yet)."""
        lane = self._lane()
        return -1 if lane < 0 else self._sticky[lane]

    @property
    def produced(self):
        lane = self._lane()
        return 0 if lane < 0 else self._produced[lane]

    def _lane(self):
        """The calling thread's lane, or -1 if it has none yet (nor shares one)."""
        me = threading.get_ident()
        for i, owner in enumerate(self._owner):
            if owner == me:
                return i
        return _shared_lane(me) if self._lanes_full else -1

    def _claim(self):
        with self._claim_lock:
            lane = self._lane()
            if lane >= 0:
                return lane
            for i, owner in enumerate(self._owner):
                if owner == 0:
                    self._owner[i] = threading.get_ident()
                    return i
            self._lanes_full = True
            return _shared_lane(threading.get_ident())

    def update_partitions(self, available, num_partitions):
        """New metadata: the partitions with a leader (sorted) and the partition count."""
        self.available = available
        self.num_partitions = num_partitions
        for i in range(LANES):
            if self._sticky[i] >= num_partitions:
                self._sticky[i] = -1

    def sticky_partition(self):
        """The calling thread's sticky partition, chosen now if it has none (Java's
        peekCurrentPartitionInfo)."""
        lane = self._lane()
        part = -1 if lane < 0 else self._sticky[lane]  # read once: an update may reset it
        if part < 0:
            lane = self._claim()
            part = self._sticky[lane] = self._pick(lane)
        return part

    def next_partition(self):
        """A random partition with a leader other than the calling thread's sticky one, and
        than the other lanes' when it can be (any if none has a leader)."""
        return self._pick(self._lane())

    def _pick(self, lane):
        current = self._sticky[lane] if lane >= 0 else -1
        stickies = set(self._sticky)
        pool = [p for p in self.available if p not in stickies] or \
            [p for p in self.available if p != current] or self.available or \
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
        """Count bytes appended to partition; True once the calling thread's sticky partition
        is due to change (sticky_batch_size bytes went to it)."""
        lane = self._lane()
        if lane < 0 or partition != self._sticky[lane]:
            return False
        self._produced[lane] += appended_bytes
        return self._produced[lane] >= self.sticky_batch_size

    def switch_from(self, partition):
        """Move on from partition if it is still the calling thread's sticky one; True if it
        was."""
        lane = self._lane()
        if lane < 0 or partition != self._sticky[lane]:
            return False
        self._sticky[lane] = self._pick(lane)
        self._produced[lane] = 0
        return True

    def update_partition_info(self, partition, appended_bytes, enable_switch):
        """After an append (Java's updatePartitionInfo): switch once sticky_batch_size bytes
        went to the partition and enable_switch (its batches are full)."""
        if self.add_produced(partition, appended_bytes) and enable_switch:
            self.switch_from(partition)
