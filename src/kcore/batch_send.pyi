"""The contract of kcore.batch_send and its twin kcore.pure.batch_send: KafkaProducer.send_batch
(without a custom partitioner). A column is a sequence, or a pyarrow array."""
from collections.abc import Callable
from typing import Any

from kcore.future import BatchFuture

__all__ = ["BatchSendPath", "prepare_rows"]

def prepare_rows(topic: str, values: Any, keys: Any, headers: Any, partitions: Any,
                 timestamps: Any, key_serializer: Callable[..., Any] | None = None,
                 value_serializer: Callable[..., Any] | None = None) -> list[list[Any]]: ...

class BatchSendPath:
    send_path: Any
    accumulator: Any
    wait_on_metadata: Callable[..., Any]
    wakeup: Any
    key_serializer: Callable[..., Any] | None
    value_serializer: Callable[..., Any] | None
    max_block_ms: float
    max_request_size: int
    buffer_memory: int
    def __init__(self, send_path: Any, accumulator: Any, wait_on_metadata: Callable[..., Any],
                 wakeup: Any, *, key_serializer: Callable[..., Any] | None,
                 value_serializer: Callable[..., Any] | None, max_block_ms: float,
                 max_request_size: int, buffer_memory: int) -> None: ...
    def send(self, topic: str, values: Any, keys: Any = None, headers: Any = None,
             partitions: Any = None, timestamps: Any = None) -> BatchFuture: ...
