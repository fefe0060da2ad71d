"""A local Apache Kafka broker for trying pyprod: :class:`LocalBroker` runs one KRaft node on
127.0.0.1 (4.3.1 by default; ``version=`` any KRaft release from 3.6; Java 17+ and Maven; the
jars are fetched once into ``~/.cache/pyprod``);
``pyprod-broker`` (:mod:`pyprod.local_broker.cli`) is its command line, ``pyprod-perf
--embedded`` and the demo start one too. Creating topics needs confluent-kafka (the ``broker``
extra). The project's test harness (more nodes, node faults, secured listeners) is tests/harness
in the repository and is not part of the package.
"""
from .broker import LocalBroker
from .jars import DEFAULT_KAFKA_VERSION, KafkaLibsUnavailable

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaLibsUnavailable", "LocalBroker"]
