"""pyprod: a fast, kafka-python compatible Kafka producer."""
from pyprod import errors

__version__ = "0.1.0"
__all__ = ["errors", "__version__"]
