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


def _in_threads(fn, n):
    import threading
    out, gate = [None] * n, threading.Barrier(n)

    def run(i):
        gate.wait()  # all alive at once: no thread ident is reused among them
        out[i] = fn()
        gate.wait()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_each_caller_thread_has_a_sticky_partition_of_its_own(k):
    """Threads sending at once fill different partitions (a lane each): each sees one sticky
    partition, its own bytes switch only it, and while partitions are left they differ."""
    p = _partitioner(k, available=range(12), count=12, batch_size=1000)

    def one():
        part = p.sticky_partition()
        assert p.sticky == part and p.produced == 0
        assert not p.add_produced(part, 600) and p.sticky_partition() == part
        assert p.produced == 600
        return part
    parts = _in_threads(one, 4)
    assert len(set(parts)) == 4 and set(parts) <= set(range(12))
    assert p.sticky == -1 and p.produced == 0  # this thread has no lane yet

    def switch():
        part = p.sticky_partition()
        assert p.add_produced(part, 1000) and p.switch_from(part)
        return part, p.sticky
    for before, after in _in_threads(switch, 3):
        assert after != before and after >= 0


def test_threads_past_the_lanes_share_one(k):
    """More threads than lanes (8): the later ones share a lane, and every one still gets a
    sticky partition among the available ones; new metadata drops every lane's too-high one."""
    p = _partitioner(k, available=range(4), count=4)
    parts = _in_threads(p.sticky_partition, 12)
    assert set(parts) <= set(range(4)) and len(set(parts)) == 4
    p.update_partitions([0], 1)
    assert set(_in_threads(p.sticky_partition, 12)) == {0}


def test_one_thread_picks_as_before_lanes(k):
    """One thread's choices are those of one sticky partition per producer (the seed's), in
    both implementations alike."""
    p = _partitioner(k, available=range(6), count=6, seed=11)
    picks = [p.sticky_partition()]
    for _ in range(20):
        assert p.switch_from(picks[-1])
        picks.append(p.sticky)
    assert all(a != b for a, b in zip(picks, picks[1:]))
    assert picks == _SEED_11_PICKS


# What one sticky partition per producer picked with seed 11 (git 11c6234's twin)
_SEED_11_PICKS = [3, 0, 5, 0, 3, 4, 0, 5, 2, 0, 3, 1, 5, 3, 4, 0, 2, 4, 3, 5, 3]
