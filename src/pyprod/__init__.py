"""pyprod: a fast, kafka-python compatible Kafka producer."""
__version__ = "0.1.0"

from pyprod import errors  # noqa: E402  (kcore's kernels import it: keep this module light)

__all__ = ["KafkaProducer", "FutureRecordMetadata", "RecordMetadata", "TopicPartition", "errors",
           "__version__"]


def __getattr__(name):  # the producer loads kcore, which imports pyprod.errors: load it lazily
    if name == "KafkaProducer":
        from pyprod.producer import KafkaProducer
        return KafkaProducer
    if name in ("FutureRecordMetadata", "RecordMetadata", "TopicPartition"):
        from pyprod import future
        return getattr(future, name)
    raise AttributeError("module 'pyprod' has no attribute %r" % (name,))
