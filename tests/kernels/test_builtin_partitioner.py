"""BuiltInPartitioner (Java's, KIP-794) on both implementations: a null-key record's sticky
partition, chosen among partitions with a leader, switched only after sticky_batch_size bytes
and once the caller enables it (its batch is full), and murmur2 for keys."""
import pytest


def _partitioner(k, available=(0, 1, 2, 3), count=4, batch_size=1000, seed=5):
    p = k.BuiltInPartitioner("t", batch_size, seed)
    p.update_partitions(list(available), count)
    return p


def test_sticky_until_batch_size_bytes_and_a_full_batch(k):
    p = _partitioner(k)
    first = p.sticky_partition()
    assert first in (0, 1, 2, 3) and p.sticky_partition() == first
    p.update_partition_info(first, 600, True)
    assert p.sticky == first and p.produced == 600
    p.update_partition_info(first, 600, False)  # enough bytes, but its batch is not full
    assert p.sticky == first and p.produced == 1200
    p.update_partition_info(first, 1, True)
    assert p.sticky != first and p.produced == 0


def test_bytes_to_another_partition_do_not_count(k):
    p = _partitioner(k)
    first = p.sticky_partition()
    assert not p.add_produced((first + 1) % 4, 5000)
    assert p.produced == 0 and p.sticky == first
    assert not p.switch_from((first + 1) % 4)
    assert p.add_produced(first, 1000) and p.switch_from(first) and p.sticky != first


def test_only_partitions_with_a_leader(k):
    p = _partitioner(k, available=(2,), count=4)
    assert p.sticky_partition() == 2
    assert p.next_partition() == 2  # the only one, even if it is the current one
    p.update_partitions([], 4)  # no leader anywhere: any partition
    assert {p.next_partition() for _ in range(200)} == {0, 1, 2, 3}


def test_new_metadata_with_fewer_partitions_drops_the_sticky_one(k):
    p = _partitioner(k, available=(3,), count=4)
    assert p.sticky_partition() == 3
    p.update_partitions([0, 1], 2)
    assert p.sticky == -1 and p.sticky_partition() in (0, 1)


def test_switches_spread_over_the_available_partitions(k):
    p = _partitioner(k, available=(0, 1, 2, 3, 4, 5), count=6)
    seen = []
    for _ in range(300):
        part = p.sticky_partition()
        seen.append(part)
        p.update_partition_info(part, 1000, True)
    assert all(a != b for a, b in zip(seen, seen[1:]))  # never the same one twice in a row
    assert set(seen) == set(range(6))


@pytest.mark.parametrize("key", [b"", b"a", b"key-17", bytes(range(256))])
def test_keys_use_murmur2(k, key):
    from kafka.partitioner.default import murmur2

    assert k.partition_for_key(key, 7) == (murmur2(key) & 0x7FFFFFFF) % 7


def test_custom_partition_adapts_both_kafka_python_styles(k):
    from pyprod.cluster import Broker, Cluster, PartitionInfo

    parts = {i: PartitionInfo("t", i, 0 if i != 1 else -1, 0, [0], [0], []) for i in range(3)}
    cluster = Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, {"t": parts})

    class ThreeX:
        def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
            return len(serialized_value) % 3

    assert k.custom_partition(ThreeX(), "t", "k", b"k", "vv", b"vv", cluster) == 2
    seen = []
    assert k.custom_partition(lambda kb, all_, avail: seen.append((kb, all_, avail)) or 0,
                              "t", "k", b"k", None, None, cluster) == 0
    assert seen == [(b"k", [0, 1, 2], [0, 2])]
