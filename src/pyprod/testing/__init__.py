"""Test harness: real brokers (Apache Kafka, tansu), librdkafka's mock cluster, read-back.

Used by tests/integration, bench/ and the README. Needs the ``test`` extras (kafka-python,
confluent-kafka); the Kafka broker also needs Java 17+ and Maven (jars are fetched once).
"""

__all__ = ["KafkaCluster", "TansuBroker", "MockCluster"]


def __getattr__(name):  # lazy: importing pyprod.testing stays cheap
    if name == "KafkaCluster":
        from .kafka_cluster import KafkaCluster
        return KafkaCluster
    if name == "TansuBroker":
        from .tansu import TansuBroker
        return TansuBroker
    if name == "MockCluster":
        from .mock_cluster import MockCluster
        return MockCluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
