"""Cluster snapshot and Metadata bookkeeping (pure logic: no network needed here; the
NetworkClient tests drive Metadata against real brokers)."""
import threading
import time

import pytest

from pyprod import errors
from pyprod.cluster import Broker, Cluster, PartitionInfo
from kcore import now_ms
from pyprod.metadata import Metadata


def cfg(**kw):
    c = {"bootstrap": [("127.0.0.1", 9092), ("127.0.0.1", 9093)], "retry_backoff_ms": 100,
         "metadata_max_age_ms": 5000, "metadata_max_idle_ms": 300000}
    c.update(kw)
    return c


def make_cluster(leaders, epochs=None, topic="t", **kw):
    brokers = {i: Broker(i, "127.0.0.1", 9000 + i, None) for i in (1, 2, 3)}
    parts = {p: PartitionInfo(topic, p, leader, (epochs or {}).get(p, 0), [1, 2], [1], [])
             for p, leader in leaders.items()}
    return Cluster(brokers, {topic: parts}, cluster_id="c1", controller_id=1, **kw)


class TestCluster:
    def test_bootstrap_fake_ids(self):
        c = Cluster.bootstrap([("127.0.0.1", 1), ("127.0.0.1", 2)])
        assert c.is_bootstrap
        assert sorted(b.node_id for b in c.brokers()) == [-2, -1]
        assert c.broker_metadata(-1) == Broker(-1, "127.0.0.1", 1, None)
        assert c.broker_metadata(-1).nodeId == -1
        assert c.topics() == set()

    def test_partition_queries(self):
        c = make_cluster({0: 1, 1: -1, 2: 2})
        assert c.topics() == {"t"}
        assert c.partitions_for_topic("t") == {0, 1, 2}
        assert c.available_partitions_for_topic("t") == {0, 2}
        assert c.partition_count("t") == 3
        assert c.leader_for_partition(("t", 0)) == 1
        assert c.leader_for_partition(("t", 1)) == -1
        assert c.leader_for_partition(("t", 9)) is None
        assert c.leader_for_partition(("nope", 0)) is None
        assert c.partitions_for_topic("nope") is None
        assert c.available_partitions_for_topic("nope") is None
        assert c.partition_count("nope") is None
        assert c.partitions_for_broker(1) == {("t", 0)}
        assert c.partitions_for_broker(3) is None
        assert c.partition_info(("t", 2)).leader_id == 2
        assert c.broker_metadata(99) is None

    def test_kafka_python_topic_partition(self):
        from kcore import TopicPartition
        assert make_cluster({0: 3}).leader_for_partition(TopicPartition("t", 0)) == 3

    def test_bad_tp(self):
        with pytest.raises(TypeError):
            make_cluster({0: 1}).leader_for_partition("t")

    def test_snapshot_not_aliased(self):
        c = make_cluster({0: 1})
        s = c.partitions_for_topic("t")
        s.add(99)
        assert c.partitions_for_topic("t") == {0}

    def test_internal_topics(self):
        c = make_cluster({0: 1}, internal_topics={"t"})
        assert c.topics() == set()
        assert c.topics(exclude_internal_topics=False) == {"t"}


class TestMetadata:
    def test_initial_state_needs_update(self):
        m = Metadata(**cfg())
        assert m.cluster.is_bootstrap and m.version == 0
        assert m.update_requested()
        assert m.time_to_next_update(now_ms()) == 0

    def test_update_bumps_version_and_sets_expiry(self):
        m = Metadata(**cfg())
        now = 1_000_000
        m.update(make_cluster({0: 1}), now)
        assert m.version == 1 and not m.update_requested()
        assert m.time_to_next_update(now) == 5000
        assert m.time_to_next_update(now + 4000) == 1000
        assert m.time_to_next_update(now + 6000) == 0

    def test_request_update_respects_backoff(self):
        m = Metadata(**cfg())
        now = 1_000_000
        m.update(make_cluster({0: 1}), now)
        assert m.request_update() == 1
        assert m.update_requested()
        assert m.time_to_next_update(now + 30) == 70  # retry_backoff_ms since the last refresh
        assert m.time_to_next_update(now + 100) == 0

    def test_failed_update_backs_off(self):
        m = Metadata(**cfg())
        now = 1_000_000
        m.failed_update(now)
        assert m.update_requested()
        assert m.time_to_next_update(now + 10) == 90
        assert m.version == 0

    def test_new_topic_skips_backoff(self):
        m = Metadata(**cfg())
        now = 1_000_000
        m.update(make_cluster({0: 1}), now)
        assert m.add_topic("t", now) is True
        assert m.add_topic("t", now) is False
        assert m.time_to_next_update(now + 1) == 0
        assert m.topics() == ["t"]

    def test_request_made_before_request_update_keeps_update_requested(self):
        m = Metadata(**cfg())
        now = 1_000_000
        m.add_topic("t", now)
        topics, req_version = m.metadata_request(now)
        assert topics == ["t"]
        m.request_update()  # e.g. NOT_LEADER seen while the metadata request was in flight
        m.update(make_cluster({0: 1}), now + 5, req_version)
        assert m.update_requested()
        topics, req_version = m.metadata_request(now + 200)
        m.update(make_cluster({0: 1}), now + 205, req_version)
        assert not m.update_requested()

    def test_new_topic_added_during_request_stays_pending(self):
        m = Metadata(**cfg())
        now = 1_000_000
        topics, rv = m.metadata_request(now)
        m.add_topic("t", now)
        m.update(Cluster({1: Broker(1, "h", 1, None)}, {}), now + 1, rv)
        assert m.update_requested()

    def test_topic_idle_expiry(self):
        m = Metadata(**cfg(metadata_max_idle_ms=1000))
        now = 1_000_000
        m.add_topic("a", now)
        m.add_topic("b", now)
        m.update(make_cluster({0: 1}, topic="a"), now)
        m.update(make_cluster({0: 1}, topic="b"), now)
        m.add_topic("b", now + 900)      # b used again; a is not
        topics, _ = m.metadata_request(now + 1500)
        assert topics == ["b"]

    def test_unseen_new_topic_not_expired(self):
        m = Metadata(**cfg(metadata_max_idle_ms=10))
        m.add_topic("a", 0)
        assert m.metadata_request(1000)[0] == ["a"]

    def test_topic_errors_and_retry(self):
        m = Metadata(**cfg())
        now = 1_000_000
        c = make_cluster({0: 1}, topic_errors={"gone": errors.UnknownTopicOrPartitionError},
                         unauthorized_topics={"secret"})
        m.update(c, now)
        assert m.cluster.topic_errors["gone"] is errors.UnknownTopicOrPartitionError
        assert "secret" in m.cluster.unauthorized_topics
        assert m.update_requested()  # invalid_metadata error: refresh again after the backoff
        assert m.time_to_next_update(now) == 100

    def test_no_leader_keeps_refreshing(self):
        m = Metadata(**cfg())
        m.update(make_cluster({0: -1}), 1_000_000)
        assert m.update_requested()

    def test_authorization_error_alone_does_not_loop(self):
        m = Metadata(**cfg())
        c = make_cluster({0: 1}, topic_errors={"x": errors.TopicAuthorizationFailedError},
                         unauthorized_topics={"x"})
        m.update(c, 1_000_000)
        assert not m.update_requested()

    def test_stale_leader_epoch_ignored(self):
        m = Metadata(**cfg())
        m.update(make_cluster({0: 1, 1: 1}, epochs={0: 5, 1: 5}), 1_000_000)
        m.update(make_cluster({0: 2, 1: 3}, epochs={0: 4, 1: 6}), 1_000_100)
        assert m.cluster.leader_for_partition(("t", 0)) == 1  # epoch 4 < 5: kept the cached one
        assert m.cluster.leader_for_partition(("t", 1)) == 3
        assert m.cluster.cluster_id == "c1"

    def test_await_update_wakes_on_update(self):
        m = Metadata(**cfg())
        v = m.request_update()
        t = threading.Timer(0.05, lambda: m.update(make_cluster({0: 1}), now_ms()))
        t.start()
        try:
            assert m.await_update(v, 5000) is True
        finally:
            t.cancel()
        assert m.version == v + 1

    def test_await_update_timeout(self):
        m = Metadata(**cfg())
        t0 = time.monotonic()
        assert m.await_update(m.version, 20) is False
        assert time.monotonic() - t0 < 5
        assert m.await_update(-1, 0) is True  # already newer than -1

    def test_await_update_after_close(self):
        m = Metadata(**cfg())
        threading.Timer(0.05, m.close).start()
        with pytest.raises(errors.KafkaError):
            m.await_update(0, 5000)

    def test_await_update_negative_timeout(self):
        with pytest.raises(ValueError):
            Metadata(**cfg()).await_update(0, -1)

    def test_bad_topic(self):
        with pytest.raises(TypeError):
            Metadata(**cfg()).add_topic(None)
        with pytest.raises(TypeError):
            Metadata(**cfg()).add_topic("")
