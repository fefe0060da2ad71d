"""Every public method of pyprod's sync API, as a user would call them: `mypy --strict` must
pass on this file (tests/test_types.py). It is type-checked, never run."""
from __future__ import annotations

from pyprod import FutureRecordMetadata, KafkaProducer, RecordMetadata, TopicPartition, errors
from pyprod.spark import publish, register


def produce(servers: str) -> int:
    with KafkaProducer(bootstrap_servers=servers, acks="all") as producer:
        future: FutureRecordMetadata = producer.send("t", b"v", key=b"k",
                                                     headers=[("h", b"1")], partition=0,
                                                     timestamp_ms=1)
        future.add_callback(lambda md: None).add_errback(lambda e: None)
        md: RecordMetadata = future.get(timeout=10)
        tp: TopicPartition = md.topic_partition
        batch = producer.send_batch("t", [b"a", b"b"], keys=[None, b"k"])
        count: int = batch.get(10).record_count
        producer.flush(timeout=5.0)
        parts: set[int] = producer.partitions_for("t")
        connected: bool = producer.bootstrap_connected()
        metrics = producer.metrics()
        magic: int = KafkaProducer.max_usable_produce_magic((2, 8))
        print(tp.partition, count, parts, connected, len(metrics), magic)
    return md.offset


def transactions(servers: str) -> None:
    producer = KafkaProducer(bootstrap_servers=servers, transactional_id="t-1")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("t", b"v")
        producer.send_offsets_to_transaction({TopicPartition("in", 0): 5}, "group")
        producer.commit_transaction()
        producer.begin_transaction()
        prepared = producer.prepare_transaction()
        other = KafkaProducer(bootstrap_servers=servers, transactional_id="t-1")
        other.resume_transaction(prepared)
        other.abort_transaction()
        other.close()
    except errors.ProducerFencedError:
        pass
    except errors.KafkaError as e:
        print("failed:", e)
    finally:
        producer.close(timeout=1.0)


def spark_helpers() -> None:
    print(register, publish)
