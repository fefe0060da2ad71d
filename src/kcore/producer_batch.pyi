"""The contract of kcore.producer_batch and its twin kcore.pure.producer_batch: one partition's
batch of records (Java's ProducerBatch), its futures and its bytes."""
from collections.abc import Iterable, Sequence
from typing import Any, Final

from typing_extensions import Buffer

from kcore.future import FutureRecordMetadata, ProduceRequestResult, TopicPartition
from kcore.record_batch_builder import RecordBatchBuilder

__all__ = ["ProducerBatch", "record_size_upper_bound", "restamp", "BATCH_HEADER",
           "piece_errors"]

BATCH_HEADER: Final = 61

def record_size_upper_bound(key: Buffer | None, value: Buffer | None,
                            headers: Iterable[tuple[str, Buffer | None]] | None) -> int: ...
def restamp(payload: Buffer, producer_id: int, producer_epoch: int,
            base_sequence: int) -> bytes: ...
def piece_errors(pieces: Sequence[tuple[int, int, ProduceRequestResult]]
                 ) -> dict[int, BaseException]: ...

class ProducerBatch:
    topic_partition: TopicPartition
    builder: RecordBatchBuilder | None
    result: ProduceRequestResult
    created_ms: int
    created_frac_us: int  # creation's microseconds past created_ms (linger counts from them)
    last_attempt_ms: int
    attempts: int
    record_count: int
    size: int
    batch_size: int
    max_size: int
    memory: Any
    payload: bytes | None
    base_sequence: int
    closed: bool
    starved: bool
    appending: bool
    segments: list[tuple[Any, int, int, int]] | None
    drained_ms: int | None
    def __init__(self, topic_partition: TopicPartition, batch_size: int, compression: str | None,
                 now_ms: int, max_size: int | None = None, frac_us: int = 0) -> None: ...
    @property
    def sequence_epoch(self) -> tuple[int, int] | None: ...
    @property
    def has_sequence(self) -> bool: ...
    def is_full(self) -> bool: ...
    def is_grown(self) -> bool: ...
    def try_append(self, timestamp_ms: int, key: Buffer | None, value: Buffer | None,
                   headers: Iterable[tuple[str, Buffer | None]] | None, header_size: int,
                   size: int) -> FutureRecordMetadata | None: ...
    def estimated_size(self) -> int: ...
    def close(self) -> None: ...
    def build(self, producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1, transactional: bool = False) -> bytes: ...
    def split(self, batch_size: int, compression: str | None) -> list[ProducerBatch]: ...
    def done(self, base_offset: int = -1, log_append_time: int = -1,
             error: BaseException | None = None,
             record_errors: dict[int, BaseException] | None = None) -> None: ...
    def add_segment(self, future: Any, ordinal: int, rank: int, count: int) -> bool: ...
