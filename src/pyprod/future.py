"""Futures of the producer (kafka-python's kafka.producer.future): kcore implements them, since
send() makes one per record."""
from kcore import (  # noqa: F401 (kcore.future or its twin)
    Future, FutureRecordMetadata, ProduceRequestResult, RecordMetadata, TopicPartition)
