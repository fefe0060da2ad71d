"""pyprod.aio.AIOKafkaProducer against a real broker (fixture ``kafka``), read back with
kafka-python's KafkaConsumer (tests/harness/readback): count, order, keys, values, headers.
run-tests.sh runs these on the compiled kcore and again on the pure twins."""
import asyncio
import uuid

import pytest

from pyprod import errors
from pyprod.aio import AIOKafkaProducer, IllegalOperation, ProducerClosed
from tests.harness.readback import read_all_kafka_python

from test_aio_await_futures import CountingLoop


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_send_round_trip_in_order_with_keys_and_headers(kafka, topic):
    name = topic(3)
    sent = [(b"k%d" % (i % 5), b"v%d" % i, [("h", b"%d" % i)]) for i in range(600)]

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                                    linger_ms=5) as p:
            futures = [await p.send(name, value, key=key, headers=headers)
                       for key, value, headers in sent]
            first = await futures[0]
            metas = await asyncio.gather(*futures)
            assert first is metas[0] or first == metas[0]
            one = await p.send_and_wait(name, b"last", key=b"k0", partition=2)
            assert one.partition == 2 and one.topic == name
            return metas
    metas = run(main())
    got = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=601)
    assert len(got) == 601
    by_value = {r.value: r for r in got}
    for (key, value, headers), meta in zip(sent, metas):
        r = by_value[value]
        assert (r.key, r.headers) == (key, headers)
        assert (r.partition, r.offset) == (meta.partition, meta.offset)
        assert meta.timestamp_type == 0 and meta.timestamp == r.timestamp
    for part in range(3):  # per partition, in send order
        values = [int(r.value[1:]) for r in got if r.partition == part and r.value != b"last"]
        assert values == sorted(values)


def test_send_batch_and_flush(kafka, topic):
    name = topic(2)

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_batch_size=2000,
                             key_serializer=str.encode, value_serializer=str.encode)
        await p.start()
        try:
            assert await p.partitions_for(name) == {0, 1}
            batch = p.create_batch()
            n = 0
            while batch.append(key="k", value="batch-%03d" % n, timestamp=None,
                               headers=[("n", b"%d" % n)]) is not None:
                n += 1
            meta = await (await p.send_batch(batch, name, partition=1))
            assert (meta.partition, meta.offset) == (1, 0)
            fut = await p.send(name, "after", key="k", partition=1)
            await p.flush()
            assert fut.done() and fut.result().offset == n
        finally:
            await p.stop()
        with pytest.raises(ProducerClosed):
            await p.send_batch(p.create_batch(), name, partition=0)
        return n
    n = run(main())
    got = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=n + 1)
    assert [r.value for r in got] == [b"batch-%03d" % i for i in range(n)] + [b"after"]
    assert all(r.partition == 1 and r.key == b"k" for r in got)
    assert got[3].headers == [("n", b"3")]


def test_transactions_commit_abort_and_offsets(kafka, topic):
    name = topic(2)
    txn_id = "aio-" + uuid.uuid4().hex

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                                    transactional_id=txn_id) as p:
            assert await p.partitions_for(name) == {0, 1}  # between transactions too
            with pytest.raises(IllegalOperation, match="while not in transaction"):
                await p.send(name, b"outside")
            async with p.transaction():
                futures = [await p.send(name, b"c%d" % i, partition=i % 2) for i in range(20)]
                await p.send_offsets_to_transaction({(name, 0): 5}, "aio-group")
            assert all(f.done() for f in futures)
            with pytest.raises(ValueError):
                async with p.transaction():
                    await p.send(name, b"aborted", partition=0)
                    raise ValueError("abort me")
            await p.begin_transaction()
            await p.send(name, b"c-last", partition=0)
            await p.commit_transaction()
    run(main())
    got = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=21,
                                isolation_level="read_committed")
    assert sorted(r.value for r in got) == sorted([b"c%d" % i for i in range(20)] + [b"c-last"])


def test_errors_that_aiokafka_programs_catch(kafka, topic):
    aiokafka_errors = pytest.importorskip("aiokafka.errors")
    name = topic(1)

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_request_size=1000)
        await p.start()
        with pytest.raises(aiokafka_errors.MessageSizeTooLargeError) as info:
            await p.send(name, b"x" * 2000)
        assert isinstance(info.value, errors.MessageSizeTooLargeError)
        with pytest.raises(TypeError):
            await p.send(name, "not bytes")
        await p.stop()
        await p.stop()  # again: nothing
        with pytest.raises(aiokafka_errors.ProducerClosed):
            await p.send(name, b"late")
    run(main())


def test_the_loop_keeps_running_while_records_are_in_flight(kafka, topic):
    """Awaiting every record wakes the loop a few times per response, not per record, and a
    ticker task keeps ticking meanwhile."""
    name = topic(1)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                                    linger_ms=20) as p:
            await p.partitions_for(name)
            tick = asyncio.ensure_future(ticker())
            loop = asyncio.get_running_loop()
            before = loop.wakeups
            futures = [await p.send(name, b"%d" % i) for i in range(2000)]
            metas = await asyncio.gather(*futures)
            wakeups = loop.wakeups - before
            tick.cancel()
        assert [m.offset for m in metas] == list(range(2000))
        return wakeups
    with asyncio.Runner(loop_factory=CountingLoop) as runner:
        wakeups = runner.run(asyncio.wait_for(main(), 60))
    assert ticks > 0 and wakeups < 100
