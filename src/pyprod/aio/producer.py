"""AIOKafkaProducer: aiokafka's producer API on pyprod.KafkaProducer (the same kcore core).

Nothing here blocks the loop. send() appends on the loop's thread (kcore's SendPath, a few
microseconds) and returns a RecordFuture, which the Sender thread completes and whose waiters
it wakes in batches (kcore's loop calls); transactional requests are awaited the same way. What
pyprod would block a thread for runs in the loop's default executor: building the producer
(bootstrap, init_transactions), waiting for a topic's metadata (the first send to a topic),
flush() and stop(), and a send() while the buffer is nearly full (pyprod's max_block_ms wait).

Differences from aiokafka, besides speed: the timestamp of a record's metadata is the broker's
when it appends them (timestamp_type 1), else the record's; log_start_offset is None; done() of
a send()'s future turns true when the broker acknowledged (callbacks then run on the loop).
"""
from __future__ import annotations

import asyncio
import sys
import traceback
import warnings
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from pyprod import errors
from pyprod.aio import config as aio_config
from pyprod.aio.batch_builder import BatchBuilder, serialize, take_records
from pyprod.aio.errors import ProducerClosed, translate
from pyprod.aio.record_future import RecordFuture, RecordMetadata, record_futures
from pyprod.aio.transactions import Transactions
from pyprod.producer import KafkaProducer

__all__ = ["AIOKafkaProducer"]

_PLAIN = frozenset((bytes, type(None)))  # keys and values send() takes as they are


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("The object should be created within an async function or "
                           "provide loop directly.") from None


def _partitioner(partitioner):
    """aiokafka's DefaultPartitioner is pyprod's built-in one (murmur2 for keys)."""
    if partitioner is None or type(partitioner).__name__ == "DefaultPartitioner":
        return None
    return partitioner


class AIOKafkaProducer(Transactions):
    """A drop-in for aiokafka.AIOKafkaProducer: aiokafka's keyword arguments, methods, errors
    (see pyprod.aio.errors for the rule with aiokafka installed) and warnings."""

    _PRODUCER_CLIENT_ID_SEQUENCE = 0
    _closed = None  # not initialized (for __del__)
    _source_traceback = None

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None,
                 partitioner: Any = None, **configs: Any) -> None:
        if loop is None:
            loop = _running_loop()
        else:
            warnings.warn("The `loop` parameter has been deprecated since 0.7.1 "
                          "and will be removed in a future release.",
                          DeprecationWarning, stacklevel=2)
        if loop.get_debug():
            self._source_traceback = traceback.extract_stack(sys._getframe(1))
        self._loop = loop
        unknown = set(configs) - set(aio_config.DEFAULTS)
        if unknown:
            raise TypeError("AIOKafkaProducer.__init__() got an unexpected keyword argument "
                            "%r" % sorted(unknown)[0])
        c = dict(aio_config.DEFAULTS, **configs)
        acks = aio_config.check(c)
        AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE += 1
        if c["client_id"] is None:
            c["client_id"] = f"aiokafka-producer-{AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE}"
        self._key_serializer = c["key_serializer"]
        self._value_serializer = c["value_serializer"]
        self._batch_size = c["max_batch_size"]
        self._low_mark = 2 * self._batch_size  # send() goes to a thread below this much memory
        self._serializing = self._key_serializer is not None or \
            self._value_serializer is not None
        self._transactional_id = c["transactional_id"]
        self._no_ack = acks == 0
        self._futures = record_futures(loop, self._no_ack)  # send()'s RecordFutures
        self._config = aio_config.producer_config(c, acks, _partitioner(partitioner), loop)
        self._producer = None
        self._pool = None       # the producer's BufferPool (send() goes to a thread when low)
        self._partitions = {}   # topic -> its partitions, once known
        self._closed = False

    def __del__(self, _warnings=warnings):
        if self._closed is False:
            _warnings.warn(f"Unclosed AIOKafkaProducer {self!r}", ResourceWarning, source=self)
            context = {"producer": self, "message": "Unclosed AIOKafkaProducer"}
            if self._source_traceback is not None:
                context["source_traceback"] = self._source_traceback
            self._loop.call_exception_handler(context)
            if self._producer is not None:
                self._producer.close(timeout=0)

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect to the cluster (and, transactional, get the producer id)."""
        assert self._loop is asyncio.get_running_loop(), (
            "Please create objects with the same loop as running with")
        if self._producer is None:
            # not a method of self: the executor's worker may keep its work item (and so
            # self) a moment after start() returns, past an unclosed producer's collection
            self._producer = await self._in_thread(_make_producer, self._config,
                                                   self._transactional_id is not None)
            self._pool = self._producer.buffer_pool

    async def stop(self) -> None:
        """Send what is buffered, wait for it, and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._producer is not None:
            await self._in_thread(self._producer.close)

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        if self._producer is not None:
            await self._in_thread(self._producer.flush)

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # -- sending ----------------------------------------------------------------------------
    async def partitions_for(self, topic: str) -> set[int]:
        """The set of the topic's partition ids (waits for its metadata)."""
        parts = await self._in_thread(self._open().topic_partitions, topic)
        self._partitions[topic] = frozenset(parts)
        return set(parts)

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None) -> RecordFuture:
        """Append a record; a future (RecordFuture) of its RecordMetadata."""
        assert not (value is None and key is None), "Need at least one: key or value"
        producer = self._producer
        if producer is None or self._closed:
            producer = self._open()  # raises
        if self._transactional_id is not None:
            self._check_send_in_transaction()
        if topic not in self._partitions or (
                partition is not None and partition not in self._partitions[topic]):
            await self._wait_for_partition(topic, partition)
        if self._serializing or key.__class__ not in _PLAIN or value.__class__ not in _PLAIN:
            key, value = serialize(self._key_serializer, self._value_serializer, key, value)
        if self._pool.available_memory >= self._low_mark:  # not _low_memory(): no coroutine
            future = self._append(producer, topic, value, key, headers, partition, timestamp_ms)
        else:
            future = await self._append_soon(producer, topic, value, key, headers, partition,
                                             timestamp_ms)
        return self._futures.wrap(future)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Sequence[tuple[str, bytes | None]] | None = None
                            ) -> RecordMetadata:
        """send(), then wait for the record's RecordMetadata."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    def create_batch(self) -> BatchBuilder:
        """An empty BatchBuilder for send_batch()."""
        return BatchBuilder(self._batch_size, key_serializer=self._key_serializer,
                            value_serializer=self._value_serializer)

    async def send_batch(self, batch: BatchBuilder, topic: str, *,
                         partition: int) -> RecordFuture | asyncio.Future[None]:
        """Send a BatchBuilder's records to one partition; a future of the first record's
        RecordMetadata, done when every record is."""
        producer = self._open()
        self._check_send_in_transaction()
        if topic not in self._partitions or partition not in self._partitions[topic]:
            await self._wait_for_partition(topic, partition)
        futures = [await self._append_soon(producer, topic, value, key, headers, partition, ts)
                   for ts, key, value, headers in take_records(batch)]
        if not futures:
            done = self._loop.create_future()
            done.set_result(None)
            return done
        return self._futures.wrap(futures[-1], futures[0])

    # -- inside -----------------------------------------------------------------------------
    def _open(self):
        if self._closed:
            raise ProducerClosed()
        if self._producer is None:
            raise translate(errors.IllegalStateError(
                "AIOKafkaProducer is not started: await start() first"))
        return self._producer

    async def _in_thread(self, fn, *args):
        """fn(*args) in the loop's default executor, pyprod's errors translated."""
        try:
            return await self._loop.run_in_executor(None, fn, *args)
        except errors.KafkaError as e:
            raise translate(e) from None

    async def _wait_for_partition(self, topic, partition):
        parts = await self.partitions_for(topic)
        assert partition is None or partition in parts, "Unrecognized partition"

    def _low_memory(self):
        """The buffer is nearly full: pyprod's send() may block (up to max_block_ms)."""
        return self._pool.available_memory < self._low_mark

    @staticmethod
    def _append(producer, topic, value, key, headers, partition, timestamp_ms):
        try:
            # positional: kafka-python's order (topic, value, key, headers, partition, ts)
            return producer.send(topic, value, key, headers, partition, timestamp_ms)
        except errors.KafkaError as e:
            raise translate(e) from None

    async def _append_soon(self, *args):
        """_append(*args), in a thread when the buffer is nearly full (never blocking the
        loop)."""
        if self._low_memory():
            return await self._loop.run_in_executor(None, self._append, *args)
        return self._append(*args)

    # -- what Transactions reads (pyprod.KafkaProducer's hooks for this layer) ---------------
    def _transaction_manager(self):
        if self._transactional_id is None:
            return None
        return self._open().transaction_manager

    def _wake_sender(self):
        self._producer.wakeup()

    def __repr__(self):
        return "<pyprod.aio.AIOKafkaProducer client_id=%s>" % (self._config["client_id"],)


class _Producer(KafkaProducer):
    """aiokafka's order without idempotence (its default; pyprod's is idempotent): one batch
    of a partition in flight, so a retried batch goes back to the head of its queue before the
    next one leaves, while other partitions keep the connection's 5 requests in flight (a plain
    KafkaProducer, as Java's, keeps order only with max_in_flight 1). Idempotent: sequence
    numbers keep the order, nothing is muted."""
    _keep_partition_order = True


def _make_producer(config, transactional):
    producer = _Producer(**config)
    if transactional:
        try:
            producer.init_transactions()
        except BaseException:
            producer.close(timeout=0)
            raise
    return producer
