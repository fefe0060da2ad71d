"""PartitionQueue: one partition's batches, oldest first (the Java accumulator's
Deque<ProducerBatch>), and what the accumulator notes about the partition: its leader as of the
last look at metadata (-1: none) and whether it is muted (a request is in flight and order needs
one at a time).

The compiled twin is a C ring of references under its own mutex, so that the accumulator's
ready() and drain() can look at every queue without the GIL while caller threads append.
"""
import collections

__all__ = ["PartitionQueue"]


class PartitionQueue(collections.deque):
    def __init__(self, tp):
        super().__init__()
        self.tp = tp
        self.leader = -1
        self.muted = False

    def __repr__(self):
        return "PartitionQueue(%r, %d batches)" % (self.tp, len(self))
