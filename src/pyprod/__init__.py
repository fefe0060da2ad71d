"""pyprod: a fast, kafka-python compatible Kafka producer."""
from kcore import FutureRecordMetadata, RecordMetadata, TopicPartition
from pyprod import errors
from pyprod.producer import KafkaProducer
from pyprod.version import __version__

__all__ = ["KafkaProducer", "FutureRecordMetadata", "RecordMetadata", "TopicPartition", "errors",
           "__version__"]
