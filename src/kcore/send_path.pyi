"""The contract of kcore.send_path and its twin kcore.pure.send_path: KafkaProducer.send, from
the closed check to the returned future."""
from collections.abc import Callable, Sequence
from typing import Any

from kcore.future import FutureRecordMetadata
from kcore.record_accumulator import RecordAccumulator
from kcore.txn_partition_map import TxnPartitionMap

__all__ = ["SendPath", "custom_partition", "fork_generation"]

def custom_partition(partitioner: Any, topic: str, key: Any, serialized_key: bytes | None,
                     value: Any, serialized_value: bytes | None, cluster: Any) -> int: ...
def fork_generation() -> int: ...

class SendPath:
    closed: bool
    def __init__(self, accumulator: RecordAccumulator,
                 wait_on_metadata: Callable[..., Any], wakeup: Any, *,
                 key_serializer: Callable[..., Any] | None,
                 value_serializer: Callable[..., Any] | None, max_block_ms: float,
                 max_request_size: int, buffer_memory: int, partitioner: Any = None,
                 txn_partitions: TxnPartitionMap | None = None,
                 on_fork: Callable[[], SendPath] | None = None) -> None: ...
    def send(self, topic: str, value: Any = None, key: Any = None,
             headers: Sequence[tuple[str, Any]] | None = None, partition: int | None = None,
             timestamp_ms: int | None = None) -> FutureRecordMetadata: ...
    def send_direct(self, topic: str, value: Any = None, key: Any = None,
                    headers: Sequence[tuple[str, Any]] | None = None,
                    partition: int | None = None,
                    timestamp_ms: int | None = None) -> FutureRecordMetadata: ...
    def divert(self, context_var: Any = None, key: Any = None,
               send: Callable[..., FutureRecordMetadata] | None = None) -> None: ...
    def check_usable(self) -> None: ...
