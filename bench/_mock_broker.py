"""librdkafka's mock cluster (one broker) as the broker of bench/ runs, in place of Apache
Kafka: it stores batches without decoding them, so on a small machine the client, not the
broker, is the bottleneck. Shared by scaling.py and gil_two_cores.py, as is stat_cpu (a process's
or thread's CPU from /proc)."""
from __future__ import annotations

import os

from _runs import Broker
from _workloads import PARTITIONS

LABEL = "librdkafka mock broker"
API_VERSION = "2.8"  # pyprod's api_version: the mock's ApiVersions answer is partial
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat_cpu(path: str) -> float:
    """CPU seconds so far from a /proc stat file (a process's or a thread's), or nan."""
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    except (OSError, IndexError, ValueError):
        return float("nan")


def version() -> str:
    """The mock's librdkafka: the one in confluent-kafka's wheel."""
    import confluent_kafka
    return f"librdkafka {confluent_kafka.libversion()[0]}"


class MockBroker(Broker):
    """Broker's interface (run_one, warm_broker) on a MockCluster; start()/stop()
    or a with block."""

    def start(self) -> "MockBroker":
        from tests.harness.mock_cluster import MockCluster
        self.cluster = MockCluster(brokers=1).start()
        self.bootstrap = self.cluster.cluster_bootstraps()
        return self

    def stop(self) -> None:
        self.cluster.stop()

    __enter__ = start

    def client_address(self, spec):
        # compare's children apply these settings as pyprod's keyword arguments;
        # confluent-kafka (librdkafka) needs none
        return self.bootstrap, {"api_version": API_VERSION} if spec["client"] == "pyprod" \
            else None

    def cpu_s(self):
        return stat_cpu(f"/proc/{self.cluster.pid}/stat")

    def thread_cpu_s(self):
        return None  # no JIT to warm up: warm_broker makes one pass

    def create(self, name, partitions=PARTITIONS):
        self.cluster.topic_create(name, partitions)

    def delete(self, topic):
        pass  # the mock answers no DeleteTopics; it keeps about 5 MB of each partition's log
