"""kcore: pyprod's compiled hot path.

Each kernel is a Cython module (``kcore/<name>.pyx``) whose ``.pxd`` exposes ``nogil`` entry points
to other kcore modules, and a pure-Python twin (``kcore/pure/<name>.py``) with the same public API.
The compiled modules are used unless ``PYPROD_NO_EXTENSIONS=1``, or unless this is a pure build
(made with that variable: see ``PURE_BUILD``); a missing extension is an ImportError, never a
silent fallback. Python code both run is in ``kcore/_<name>.py`` beside its kernel: the pure twin
imports it and the compiled module compiles it in (Cython ``include``), so the compiled build never
loads a twin and its types and tracebacks name the compiled module that ran
(``kcore.future.RecordMetadata``). Such a file must not define a name its compiled module also
defines, and editing it needs a rebuild, as editing a ``.pyx`` does.

The twins' contract is a stub beside each kernel (``kcore/<name>.pyi``): its public classes,
functions and constants with their signatures, which tests/kernels/test_contracts.py checks on
both implementations. The names below are imported one by one from the implementation chosen at
import; a type checker reads the compiled branch, typed by those stubs.
"""
import os
import sys
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING

KERNELS = ("varint", "crc", "murmur", "record_batch_builder", "buffer_pool", "timing_wheel",
           "future", "producer_batch", "txn_partition_map", "builtin_partitioner",
           "partition_queue", "record_accumulator", "send_path", "batch_send", "selector",
           "channel", "produce_codec", "network_poll", "sender_loop")
# A build made with PYPROD_NO_EXTENSIONS=1 (a pure py3-none-any wheel) ships the marker _pure:
# it has no compiled kernels, so it takes its twins without the variable at run time.
PURE_BUILD = os.path.exists(os.path.join(os.path.dirname(__file__), "_pure"))
EXTENSIONS = not PURE_BUILD and os.environ.get("PYPROD_NO_EXTENSIONS") != "1"
# Which kernels run, and why: "compiled", "pure (PYPROD_NO_EXTENSIONS=1)" or "pure (pure build)".
IMPLEMENTATION = ("compiled" if EXTENSIONS else
                  "pure (pure build)" if PURE_BUILD else "pure (PYPROD_NO_EXTENSIONS=1)")

# The compiled kernels, else their pure twins (a type checker takes the first branch: the stubs).
if TYPE_CHECKING or EXTENSIONS:
    from kcore.varint import (decode_unsigned_varint, decode_varint, encode_unsigned_varint,
                              encode_varint, size_of_unsigned_varint, size_of_varint)
    from kcore.crc import crc32c, crc32c_backend
    from kcore.murmur import murmur2, partition_for_key
    from kcore.record_batch_builder import RECORD_BATCH_HEADER_SIZE, RecordBatchBuilder
    from kcore.buffer_pool import BufferPool, PoolBuffer
    from kcore.timing_wheel import TimingWheel
    from kcore.future import (AioFutures, AioRecordFuture, BatchFuture, BatchMetadata, Future,
                              FutureRecordMetadata, ProduceRequestResult, RecordMetadata,
                              TopicPartition)
    from kcore.producer_batch import (BATCH_HEADER, ProducerBatch, piece_errors,
                                      record_size_upper_bound, restamp)
    from kcore.txn_partition_map import SEQUENCE_MODULO, TxnPartitionMap
    from kcore.builtin_partitioner import BuiltInPartitioner
    from kcore.partition_queue import PartitionQueue
    from kcore.record_accumulator import ReadyCheckResult, RecordAccumulator, TopicInfo
    from kcore.send_path import SendPath, custom_partition, fork_generation
    from kcore.batch_send import BatchSendPath, prepare_rows
    from kcore.selector import MAX_IOV, Selector, Waker, recv_into, send_buffers
    from kcore.channel import INBOX, RECV_CHUNK, Channel
    from kcore.produce_codec import decode_produce_response, encode_produce_body
    from kcore.network_poll import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING,
                                    DISCONNECTED, HANDSHAKING, MAX_DELAY_MS, READY, SETTING_UP,
                                    ClientResponse, InFlightRequest, BrokerConnection, NetworkPoll,
                                    drop_tracebacks, now_ms, ssl_failure)
    from kcore.sender_loop import QUEUE_SCAN, ProduceResponseHandler, SenderLoop
else:
    from kcore.pure.varint import (decode_unsigned_varint, decode_varint, encode_unsigned_varint,
                                   encode_varint, size_of_unsigned_varint, size_of_varint)
    from kcore.pure.crc import crc32c, crc32c_backend
    from kcore.pure.murmur import murmur2, partition_for_key
    from kcore.pure.record_batch_builder import RECORD_BATCH_HEADER_SIZE, RecordBatchBuilder
    from kcore.pure.buffer_pool import BufferPool, PoolBuffer
    from kcore.pure.timing_wheel import TimingWheel
    from kcore.pure.future import (AioFutures, AioRecordFuture, BatchFuture, BatchMetadata,
                                   Future, FutureRecordMetadata, ProduceRequestResult,
                                   RecordMetadata, TopicPartition)
    from kcore.pure.producer_batch import (BATCH_HEADER, ProducerBatch, piece_errors,
                                           record_size_upper_bound, restamp)
    from kcore.pure.txn_partition_map import SEQUENCE_MODULO, TxnPartitionMap
    from kcore.pure.builtin_partitioner import BuiltInPartitioner
    from kcore.pure.partition_queue import PartitionQueue
    from kcore.pure.record_accumulator import ReadyCheckResult, RecordAccumulator, TopicInfo
    from kcore.pure.send_path import SendPath, custom_partition, fork_generation
    from kcore.pure.batch_send import BatchSendPath, prepare_rows
    from kcore.pure.selector import MAX_IOV, Selector, Waker, recv_into, send_buffers
    from kcore.pure.channel import INBOX, RECV_CHUNK, Channel
    from kcore.pure.produce_codec import decode_produce_response, encode_produce_body
    from kcore.pure.network_poll import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING,
                                         DISCONNECTED, HANDSHAKING, MAX_DELAY_MS, READY,
                                         SETTING_UP, ClientResponse, InFlightRequest, BrokerConnection,
                                         NetworkPoll, drop_tracebacks, now_ms, ssl_failure)
    from kcore.pure.sender_loop import QUEUE_SCAN, ProduceResponseHandler, SenderLoop

__all__ = [
    # varint
    "encode_varint", "decode_varint", "size_of_varint", "encode_unsigned_varint",
    "decode_unsigned_varint", "size_of_unsigned_varint",
    # crc, murmur
    "crc32c", "crc32c_backend", "murmur2", "partition_for_key",
    # record_batch_builder, buffer_pool, timing_wheel
    "RecordBatchBuilder", "RECORD_BATCH_HEADER_SIZE", "BufferPool", "PoolBuffer", "TimingWheel",
    # future
    "TopicPartition", "RecordMetadata", "ProduceRequestResult", "FutureRecordMetadata", "Future",
    "BatchFuture", "BatchMetadata", "AioFutures", "AioRecordFuture",
    # producer_batch, txn_partition_map, builtin_partitioner, partition_queue
    "ProducerBatch", "record_size_upper_bound", "restamp", "BATCH_HEADER", "piece_errors",
    "TxnPartitionMap", "SEQUENCE_MODULO", "BuiltInPartitioner", "PartitionQueue",
    # record_accumulator, send_path, batch_send
    "RecordAccumulator", "ReadyCheckResult", "TopicInfo", "SendPath", "custom_partition",
    "fork_generation", "BatchSendPath", "prepare_rows",
    # selector, channel, produce_codec
    "Selector", "Waker", "send_buffers", "recv_into", "MAX_IOV", "Channel", "RECV_CHUNK", "INBOX",
    "encode_produce_body", "decode_produce_response",
    # network_poll, sender_loop
    "DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
    "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest", "ClientResponse",
    "BrokerConnection", "NetworkPoll", "ssl_failure", "drop_tracebacks", "now_ms",
    "SenderLoop", "ProduceResponseHandler", "QUEUE_SCAN",
]


def kernels(pure: bool = not EXTENSIONS) -> SimpleNamespace:
    """Every public name of one implementation (compiled or pure), as a namespace whose
    ``pure`` says which. The compiled one is asked for by pure=False even under
    PYPROD_NO_EXTENSIONS=1 (an ImportError if it is not built)."""
    modules = _pure_modules() if pure else _compiled_modules()
    names = {name: getattr(module, name) for module in modules for name in module.__all__}
    return SimpleNamespace(pure=pure, **names)


def _pure_modules() -> tuple[ModuleType, ...]:
    from kcore import pure
    from kcore.pure import (batch_send, buffer_pool, builtin_partitioner, channel,  # noqa: F401
                            crc, future, murmur, network_poll, partition_queue, produce_codec,
                            producer_batch, record_accumulator, record_batch_builder, selector,
                            send_path, sender_loop, timing_wheel, txn_partition_map, varint)
    return tuple(getattr(pure, kernel) for kernel in KERNELS)


def _compiled_modules() -> tuple[ModuleType, ...]:
    from kcore import (batch_send, buffer_pool, builtin_partitioner, channel,  # noqa: F401
                       crc, future, murmur, network_poll, partition_queue, produce_codec,
                       producer_batch, record_accumulator, record_batch_builder, selector,
                       send_path, sender_loop, timing_wheel, txn_partition_map, varint)
    return tuple(getattr(sys.modules[__name__], kernel) for kernel in KERNELS)
