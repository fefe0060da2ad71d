"""pyprod.aio without idempotence (aiokafka's default) keeps each partition's order as aiokafka
does, one batch of a partition in flight, while the connection carries up to 5 requests (other
partitions'): librdkafka's mock cluster injects the faults and holds responses; confluent-kafka
reads the data back. run-tests.sh runs these on the compiled kcore and on the pure twins."""
import asyncio
import collections
import time

from pyprod.aio import AIOKafkaProducer
from tests.harness.mock_cluster import ApiKey, Err
from tests.harness.readback import read_all_confluent

KEYS = 36  # b"key-<i % KEYS>" hash onto all 12 partitions
WAIT = 60  # bound on every wait here (seconds)


def _topic(mc, name, partitions, brokers=(1, 2, 3)):
    """Partition p led by brokers[p % len(brokers)]."""
    mc.topic_create(name, partitions, 3)
    for p in range(partitions):
        mc.partition_set_leader(name, p, brokers[p % len(brokers)])
    return name


async def _until(check, what):
    """A bounded wait that lets the loop run (callbacks), never a timing assertion."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "%s: not within %g s" % (what, WAIT)
        await asyncio.sleep(0.01)


def _produce_requests(mc, broker):
    return sum(1 for b, key, _ in mc.get_requests() if b == broker and key == ApiKey.Produce)


def _gauge(p, name):
    return p._producer.metrics()["producer-metrics"][name]


def test_order_kept_per_partition_under_retries(mock_cluster):
    """Retriable errors on Produce requests mid-stream, 12 partitions on 3 brokers whose 20 ms
    answers keep several requests in flight: every record acknowledged once, each partition
    in send order, keys and values as sent (confluent-kafka reads them back)."""
    mc = mock_cluster
    name = _topic(mc, "aio-order", 12)
    for broker in (1, 2, 3):
        mc.broker_set_rtt(broker, 20)
    n = 3000

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=mc.bootstrap_servers, linger_ms=2,
                                    retry_backoff_ms=20) as p:
            futures = []
            for i in range(n):
                if i in (600, 1800):
                    mc.push_request_errors(ApiKey.Produce, [Err.NOT_ENOUGH_REPLICAS] * 8)
                futures.append(await p.send(name, b"%d" % i, key=b"key-%d" % (i % KEYS)))
                if i % 20 == 19:
                    await asyncio.sleep(0.005)
            metas = await asyncio.gather(*futures)
            return metas, _gauge(p, "record-retry-total")
    metas, retries = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert retries >= 1  # the faults did land: batches were retried
    read = read_all_confluent(mc.bootstrap_servers, name, n, timeout=WAIT)
    assert sorted(int(r.value) for r in read) == list(range(n))  # each once
    at = {(r.partition, r.offset): r for r in read}
    for i, md in enumerate(metas):
        r = at[(md.partition, md.offset)]
        assert (r.value, r.key) == (b"%d" % i, b"key-%d" % (i % KEYS))
    by_partition = collections.defaultdict(list)
    for r in read:  # sorted by (partition, offset)
        by_partition[r.partition].append(int(r.value))
    assert len(by_partition) == 12
    for part, values in by_partition.items():
        assert values == sorted(values), "order broken in partition %d: %s" % (part, values[:20])


def test_five_requests_in_flight_one_batch_per_partition(mock_cluster):
    """Broker 1 holds its answer to a record of partition 0 (HOLD_MS): records of partitions
    1-4 go out meanwhile on the same connection, each in its own request (5 in flight), while
    a second record of partition 0 waits for the first's answer (its partition is muted): it
    completes after partition 4's. HOLD_MS bounds how long the sends may take."""
    mc = mock_cluster
    name = _topic(mc, "aio-in-flight", 5, brokers=(1,))
    hold_ms = 10000

    async def main():
        async with AIOKafkaProducer(bootstrap_servers=mc.bootstrap_servers) as p:
            for part in range(5):  # metadata and the connection, before the clock starts
                await p.send_and_wait(name, b"warm", partition=part)
            mc.start_request_tracking()
            mc.broker_push_request_error_rtts(1, ApiKey.Produce, [(0, hold_ms)])
            done = []
            futures = {}

            async def send(tag, part):
                futures[tag] = f = await p.send(name, tag.encode(), key=b"k", partition=part)
                f.add_done_callback(lambda _f: done.append(tag))
            await send("a", 0)
            await _until(lambda: _produce_requests(mc, 1) == 1, "a's request")
            await send("b", 0)
            for part in range(1, 5):
                await send("c%d" % part, part)
                await _until(lambda: _produce_requests(mc, 1) == 1 + part, "c%d's" % part)
            in_flight = _gauge(p, "requests-in-flight")
            await asyncio.gather(*futures.values())
            return done, in_flight, {t: f.result() for t, f in futures.items()}
    done, in_flight, metas = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert in_flight == 5  # a and c1..c4, one connection (all partitions on broker 1)
    assert done == ["a", "c1", "c2", "c3", "c4", "b"]
    assert (metas["a"].offset, metas["b"].offset) == (1, 2)
    read = read_all_confluent(mc.bootstrap_servers, name, 11, timeout=WAIT)
    assert [r.value for r in read if r.partition == 0] == [b"warm", b"a", b"b"]
    assert [(r.partition, r.value) for r in read if r.partition > 0] == [
        (part, v) for part in range(1, 5) for v in (b"warm", b"c%d" % part)]
