"""The contract of kcore.record_batch_builder and its twin kcore.pure.record_batch_builder: the
Kafka record batch v2 (magic 2) writer."""
from collections.abc import Iterable
from typing import Final

from typing_extensions import Buffer

__all__ = ["RecordBatchBuilder", "RECORD_BATCH_HEADER_SIZE"]

RECORD_BATCH_HEADER_SIZE: Final = 61

class RecordBatchBuilder:
    def __init__(self, max_size: int, compression: str | None = "none", producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False) -> None: ...
    def __len__(self) -> int: ...
    def size_in_bytes(self) -> int: ...
    def raise_max_size(self, max_size: int) -> None: ...
    def append(self, timestamp_ms: int | None, key: Buffer | None, value: Buffer | None,
               headers: Iterable[tuple[str, Buffer | None]] | None = ()) -> bool: ...
    def build(self) -> bytes: ...
