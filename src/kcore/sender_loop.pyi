"""The contract of kcore.sender_loop and its twin kcore.pure.sender_loop: the Sender thread's
loop (Java's Sender: run and runOnce with a transactional step, sendProducerData, the
ProduceRequests and their responses, the batches' delivery deadlines, the closing drain). ``client``, ``metadata`` and ``sender`` are pyprod's
NetworkClient, Metadata and Sender."""
import collections
from collections.abc import Callable
from typing import Any, Final

from typing_extensions import Buffer

from kcore.network_poll import ClientResponse, NetworkPoll
from kcore.produce_codec import _PartitionResult
from kcore.producer_batch import ProducerBatch
from kcore.record_accumulator import RecordAccumulator
from kcore.timing_wheel import TimingWheel
from kcore.txn_partition_map import TxnPartitionMap

__all__ = ["SenderLoop", "ProduceResponseHandler", "QUEUE_SCAN"]

QUEUE_SCAN: Final = "queue-scan"

class SenderLoop:
    accumulator: RecordAccumulator
    txn_partitions: TxnPartitionMap | None
    net: NetworkPoll | None
    running: bool
    forced: bool
    wheel: TimingWheel
    acks: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    guarantee_order: bool
    transactional_id: str | None
    on_partition: Callable[[ProducerBatch, _PartitionResult], object]
    on_error: Callable[[ProducerBatch, BaseException], object]
    on_piece_done: Callable[[ProducerBatch], object] | None
    on_fail: Callable[[ProducerBatch, BaseException], object] | None
    split_parents: dict[ProducerBatch, ProducerBatch]
    in_flight: dict[ProducerBatch, int]
    requests: int
    batches: int
    records_sent: int
    records_out: int
    compressed: bool
    bytes_out: int
    ratio_sum: float
    record_size_sum: float
    queue_ms_sum: int
    batch_max: int
    queue_ms_max: int
    record_size_max: float
    poll_ns: int
    polls: int
    # topic -> its TopicTally, node id -> its NodeTally (int fields, ratio_sum a float; see
    # sender_loop.pxd): the metrics counters per topic and per node
    topic_tallies: dict[str, Any]
    node_tallies: dict[int, Any]
    samples: collections.deque[tuple[Any, ...]] | None
    totals: dict[Any, int] | None
    sample_every_ms: int
    sample_due_ms: int
    def __init__(self, accumulator: RecordAccumulator,
                 txn_partitions: TxnPartitionMap | None, *, now: int, acks: int,
                 request_timeout_ms: int, delivery_timeout_ms: int, guarantee_order: bool,
                 on_partition: Callable[[ProducerBatch, _PartitionResult], object],
                 on_error: Callable[[ProducerBatch, BaseException], object],
                 on_piece_done: Callable[[ProducerBatch], object] | None = None,
                 on_fail: Callable[[ProducerBatch, BaseException], object] | None = None,
                 net: NetworkPoll | None = None,
                 transactional_id: str | None = None) -> None: ...
    def run(self, sender: Any) -> None: ...
    def step(self, sender: Any) -> None: ...
    def run_once(self, client: Any, metadata: Any, max_request_size: int) -> int | None: ...
    def send_producer_data(self, client: Any, metadata: Any, max_request_size: int,
                           now: int) -> float: ...
    def request(self, version: int, batches: list[ProducerBatch], now: int, node: int | None = None
                ) -> tuple[list[Buffer], ProduceResponseHandler]: ...
    def poll_net(self, timeout: float, now: int) -> None: ...
    def snapshot(self, now: int) -> tuple[int, dict[str, float], dict[str, dict[str, float]],
                                          dict[int, dict[str, int]], dict[Any, int] | None]: ...
    def landed(self, batch: ProducerBatch) -> bool: ...
    def fail_expired(self, now: int) -> None: ...
    def expire(self, now: int) -> tuple[list[ProducerBatch], bool]: ...
    def schedule_queue_scan(self, now: int, at: float) -> None: ...
    def next_deadline_delay(self, now: int) -> int: ...
    def succeed(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None: ...
    def counters(self) -> dict[str, int]: ...

class ProduceResponseHandler:
    """Made by SenderLoop.request only (the pure twin's constructor is no contract)."""
    def __call__(self, response: ClientResponse) -> None: ...
