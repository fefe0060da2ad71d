"""Every public method of pyprod.aio, as an aiokafka program calls them: `mypy --strict` must
pass on this file (tests/test_types.py). It is type-checked, never run."""
from __future__ import annotations

import asyncio

from pyprod import TopicPartition, errors
from pyprod.aio import AIOKafkaProducer, BatchBuilder, RecordMetadata


async def produce(servers: str) -> int:
    async with AIOKafkaProducer(bootstrap_servers=servers, acks="all") as producer:
        future = await producer.send("t", b"v", key=b"k", partition=0, timestamp_ms=1,
                                     headers=[("h", b"1")])
        md: RecordMetadata = await future
        again: RecordMetadata = await producer.send_and_wait("t", b"v")
        parts: set[int] = await producer.partitions_for("t")
        batch: BatchBuilder = producer.create_batch()
        batch.append(timestamp=None, key=None, value=b"x")
        print(batch.size(), batch.record_count(), batch.closed())
        await (await producer.send_batch(batch, "t", partition=0))
        await producer.flush()
        print(again.offset, parts)
    return int(md.offset)


async def transactions(servers: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id="t-1")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send("t", b"v")
            await producer.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "group")
        await producer.begin_transaction()
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.commit_transaction()
    except errors.ProducerFenced:
        pass
    finally:
        await producer.stop()


def main() -> None:
    asyncio.run(produce("127.0.0.1:9092"))
