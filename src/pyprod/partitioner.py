"""User partitioners, kafka-python style.

Keyed records without one go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` (Java's rule,
kcore.partition_for_key); null-key records to the uniform sticky partition (KIP-794), which the
RecordAccumulator keeps per topic as the Java client does (kcore.record_accumulator.TopicInfo).

A ``partitioner`` config overrides both: an object with
``partition(topic, key, serialized_key, value, serialized_value, cluster)`` (kafka-python 3.x),
or a callable ``f(serialized_key, all_partitions, available_partitions)`` (2.x). One with
``on_new_batch(topic, cluster, prev_partition)`` gets KIP-480 behaviour: it is told when a
null-key record would start a new batch, and asked again.
"""


def custom_partition(partitioner, topic, key, serialized_key, value, serialized_value, cluster):
    method = getattr(partitioner, "partition", None)
    if method is not None:
        return method(topic, key, serialized_key, value, serialized_value, cluster)
    all_partitions = sorted(cluster.partitions_for_topic(topic))
    available = sorted(cluster.available_partitions_for_topic(topic) or ())
    return partitioner(serialized_key, all_partitions, available)
