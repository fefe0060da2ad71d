"""Where pyprod.aio's time per record goes on bench/aio.py's workload: the event loop thread's
CPU per record (time.thread_time) for the parts of the loop, one process, librdkafka's mock
cluster as the broker.

- ``gather, asyncio.Future``: asyncio.gather of 10,000 done asyncio Futures (loop.create_future),
  per child: asyncio's own cost per gathered future (the floor of any future type);
- ``gather, RecordFuture``: the same with 10,000 done pyprod.aio RecordFutures;
- ``await send()``: ``await send()`` per record, nothing waited on (flushed after, not counted);
- ``bench loop``: bench/aio.py's loop (``await send()`` per record, the futures gathered a
  10,000-record window behind, flush), its loop thread's CPU and the process's CPU.

    python bench/aio_parts.py --records 500000 --rounds 3

Medians over rounds (the gathers: the best of 20 each round).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import _mock_broker
import compare

WINDOW = 10_000


async def _gather_per_child(make):
    best = float("inf")
    for _ in range(20):
        futures = make()
        t0 = time.thread_time()
        await asyncio.gather(*futures)
        best = min(best, time.thread_time() - t0)
    return best / WINDOW * 1e6


def _done_asyncio_futures(loop):
    def make():
        futures = [loop.create_future() for _ in range(WINDOW)]
        for f in futures:
            f.set_result(None)
        return futures
    return make


def _done_record_futures(loop):
    import kcore
    from pyprod.aio.record_future import record_futures
    wrap = record_futures(loop).wrap
    result = kcore.ProduceRequestResult(kcore.TopicPartition("t", 0))
    result.done(0, -1)
    records = [kcore.FutureRecordMetadata(result, i, 0, 0, 100, 0) for i in range(WINDOW)]
    return lambda: [wrap(f) for f in records]


async def _loops(bootstrap, topic, n):
    """(await send() alone, the bench loop, the bench loop's process CPU): us per record."""
    from pyprod.aio import AIOKafkaProducer
    value = compare._value(100)
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                                enable_idempotence=False) as p:
        await asyncio.gather(*[await p.send(topic, value, partition=i)
                               for i in range(compare.PARTITIONS)])
        send = p.send
        t0 = time.thread_time()
        for _ in range(n):
            await send(topic, value)
        send_only = time.thread_time() - t0
        await p.flush()
        c0, t0 = compare._cpu(), time.thread_time()
        futures, older = [], []
        for _ in range(n):  # bench/aio.py's loop (compare._run_aiokafka)
            futures.append(await send(topic, value))
            if len(futures) == WINDOW:
                await asyncio.gather(*older)
                older, futures = futures, []
        await p.flush()
        await asyncio.gather(*(futures + older))
        loop_cpu, cpu = time.thread_time() - t0, compare._cpu() - c0
    return send_only / n * 1e6, loop_cpu / n * 1e6, cpu / n * 1e6


async def _round(bootstrap, topic, n):
    loop = asyncio.get_running_loop()
    return (await _gather_per_child(_done_asyncio_futures(loop)),
            await _gather_per_child(_done_record_futures(loop)),
            *await _loops(bootstrap, topic, n))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    names = ("gather, asyncio.Future (per child)", "gather, RecordFuture (per child)",
             "await send() (per record)", "bench loop: loop thread", "bench loop: process")
    rows = []
    with _mock_broker.MockBroker() as broker:
        for r in range(args.rounds):
            topic = "aio-parts-%s" % os.urandom(4).hex()
            broker.create(topic)
            rows.append(asyncio.run(_round(broker.bootstrap, topic, args.records)))
            print("round %d: %s" % (r, ", ".join("%.3f" % v for v in rows[-1])), flush=True)
    for i, name in enumerate(names):
        print("%-38s %6.3f us CPU" % (name, statistics.median(row[i] for row in rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
