"""pyprod.aio: asyncio producing on pyprod's core, as a drop-in for aiokafka's producer.

    from pyprod.aio import AIOKafkaProducer   # was: from aiokafka import AIOKafkaProducer

AIOKafkaProducer takes aiokafka's configuration keys and has its methods (start, stop, send,
send_and_wait, flush, partitions_for, create_batch / send_batch, transactions and the
``transaction()`` context, ``async with``), warnings and ValueError messages; it runs on
pyprod.KafkaProducer, whose futures are all awaitable without blocking the loop (docs/asyncio.md).

Errors, the rule: pyprod.aio raises pyprod's classes (import them from ``pyprod.errors``:
kafka-python's names plus aiokafka's ProducerClosed, ProducerFenced and IllegalOperation). When
aiokafka is importable, each exception that leaves pyprod.aio is also an instance of aiokafka's
class of the same meaning (same name, else same broker error code, else its nearest ancestor's),
so code that catches ``aiokafka.errors.X`` keeps working; without aiokafka, pyprod's alone.
IllegalOperation is not a KafkaError, as in aiokafka. See pyprod.aio.errors.
"""
from pyprod.aio.batch_builder import BatchBuilder, BatchRecordMetadata
from pyprod.aio.errors import IllegalOperation, ProducerClosed, ProducerFenced
from pyprod.aio.producer import AIOKafkaProducer
from pyprod.aio.record_future import RecordFuture, RecordMetadata
from pyprod.aio.transactions import TransactionContext

__all__ = ["AIOKafkaProducer", "BatchBuilder", "BatchRecordMetadata", "RecordFuture",
           "RecordMetadata", "TransactionContext", "ProducerClosed", "ProducerFenced",
           "IllegalOperation"]
