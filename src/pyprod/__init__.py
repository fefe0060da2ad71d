"""pyprod: a fast, kafka-python compatible Kafka producer."""
__version__ = "0.1.0"

from pyprod import errors  # noqa: E402
from pyprod.future import FutureRecordMetadata, RecordMetadata, TopicPartition
from pyprod.producer import KafkaProducer  # noqa: E402

__all__ = ["KafkaProducer", "FutureRecordMetadata", "RecordMetadata", "TopicPartition", "errors",
           "__version__"]
