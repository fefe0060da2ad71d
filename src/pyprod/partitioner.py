"""User partitioners, kafka-python style (kept as an import path; the code is kcore's).

Keyed records without one go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` (Java's rule);
null-key records to the topic's uniform sticky partition (KIP-794). Both are kcore's
BuiltInPartitioner, which the RecordAccumulator keeps per topic as the Java client does.

A ``partitioner`` config overrides both: an object with
``partition(topic, key, serialized_key, value, serialized_value, cluster)`` (kafka-python 3.x),
or a callable ``f(serialized_key, all_partitions, available_partitions)`` (2.x). One with
``on_new_batch(topic, cluster, prev_partition)`` gets KIP-480 behaviour: it is told when a
null-key record would start a new batch, and asked again. kcore's SendPath calls it through
``custom_partition``.
"""
from kcore import custom_partition  # noqa: F401

__all__ = ["custom_partition"]
