"""A local Apache Kafka 4.x broker for trying pyprod and for your own tests.

:class:`KafkaCluster` runs a real KRaft cluster on 127.0.0.1 (Java 17+ and Maven; the jars are
fetched once); ``pyprod-broker`` (:mod:`pyprod.testing.broker_cli`) is its command line. Its
admin client needs confluent-kafka (the ``broker`` extras). The project's own test harness
(secured listeners, fault injection, fuzzing, read-back) is tests/harness in the repository and
is not part of the package.
"""
from .kafka_cluster import KafkaCluster
from .kafka_libs import DEFAULT_KAFKA_VERSION, KafkaLibsUnavailable

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaCluster", "KafkaLibsUnavailable"]
