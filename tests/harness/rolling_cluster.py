"""A KRaft cluster whose nodes may run different Apache Kafka versions, for rolling upgrades:
started on one version, then ``upgrade_node(i, version)`` stops node ``i`` cleanly and starts
it again on the same data, ports and configuration with the newer jars. ``upgrade_features``
then raises the finalized features (metadata.version, transaction.version...) to a release's,
as ``kafka-features.sh upgrade --release-version`` does.

    with RollingKafkaCluster(3, "3.9.2") as cluster:
        for i in range(3):
            cluster.upgrade_node(i, "4.4.0")
        cluster.upgrade_features("4.4")
"""
from __future__ import annotations

import subprocess
import time

from pyprod.local_broker.jars import ensure_kafka_libs

from .kafka_cluster import KafkaCluster, java_command

__all__ = ["RollingKafkaCluster"]

CREATE_ATTEMPTS = 5


class RollingKafkaCluster(KafkaCluster):
    def __init__(self, nodes: int, version: str, **kwargs):
        super().__init__(nodes, version=version, **kwargs)
        self.node_versions = [version] * nodes
        self._node_libs: dict[int, str] = {}

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        # the node's own version: its jars and its logging configuration
        saved = self.version, self._libs
        self.version = self.node_versions[i]
        self._libs = self._node_libs.get(i, self._libs)
        try:
            return super()._java(i, main, *args)
        finally:
            self.version, self._libs = saved

    def _cds_opts(self, i: int) -> list[str]:
        return []  # one class-data archive cannot serve two versions' jars

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: dict | None = None, timeout: float = 30.0) -> str:
        """LocalBroker's, asked again while a just-started quorum still drops the admin
        client's connections (_DESTROY_BROKER, _TRANSPORT)."""
        from confluent_kafka import KafkaException
        for attempt in range(CREATE_ATTEMPTS):
            try:
                return super().create_topic(name, partitions, replication_factor, configs,
                                            timeout)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    self.wait_topic(name, partitions, replication_factor or 3, timeout)
                    return name
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(1)
        return name

    def upgrade_node(self, i: int, version: str, timeout: float = 90.0) -> None:
        """Roll node ``i`` to ``version``: clean shutdown, then a start on the new jars."""
        libs = ensure_kafka_libs(version)
        self.stop_node(i)
        self.node_versions[i] = version
        self._node_libs[i] = libs
        self.start_node(i, timeout=timeout)

    def upgrade_features(self, release: str, version: str | None = None) -> str:
        """``FeatureCommand upgrade --release-version release`` (run on ``version``'s jars,
        default: node 0's); its output. Raises on failure."""
        argv = java_command("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                            self.bootstrap_servers, "upgrade", "--release-version", release,
                            version=version or self.node_versions[0])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"feature upgrade to {release} failed:\n{done.stdout}\n"
                               f"{done.stderr}")
        return done.stdout

    def describe_features(self) -> str:
        argv = java_command("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                            self.bootstrap_servers, "describe", version=self.node_versions[0])
        return subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
