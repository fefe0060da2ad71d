"""The contract of kcore.produce_codec and its twin kcore.pure.produce_codec: ProduceRequest
bodies and ProduceResponse results (v3..v12; v12 is v11 on the wire)."""
from collections.abc import Iterable

from typing_extensions import Buffer

__all__ = ["encode_produce_body", "decode_produce_response"]

# (topic, partition, error_code, base_offset, log_append_time_ms, log_start_offset,
#  error_message, record_errors: ((batch_index, message), ...))
_PartitionResult = tuple[str, int, int, int, int, int, str | None,
                         tuple[tuple[int, str | None], ...]]

def encode_produce_body(version: int, acks: int, timeout_ms: int, transactional_id: str | None,
                        batches: Iterable[tuple[str, int, Buffer | None]]) -> list[Buffer]: ...
def decode_produce_response(version: int, body: Buffer
                            ) -> tuple[list[_PartitionResult], int]: ...
