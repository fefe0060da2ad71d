"""compare.py's child: one client, one run, one JSON line on stdout (``compare.py --child
SPEC``). Wall time from the first timed send() until flush() returns; CPU from getrusage over
the same window."""
from __future__ import annotations

import functools
import itertools
import json
import os
import resource
import threading
import time

from _workloads import KEYS
from pyprod.perf import LatencyRecorder, Pacer, latency_summary

def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _value(size: int) -> bytes:
    import random
    rng = random.Random(size)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def _keys(spec):
    return [b"key-%06d" % i for i in range(KEYS)] if spec["keyed"] else None


def _gate(spec) -> None:
    """Wait for spec's start_at (wall clock, s) if it has one: runs in several processes
    start their timed sends together (bench/connections.py)."""
    if spec.get("start_at"):
        time.sleep(max(0.0, spec["start_at"] - time.time()))


def _split(n: int, parts: int) -> list:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def _chunks(n: int, size: int) -> list:
    """n records as transactions of size records (the last one shorter)."""
    return [min(size, n - i) for i in range(0, n, size)]


CHUNK = 1000  # records between confluent-kafka's poll(0) calls; every client's loop has them


def _send_loop(send, topic, value, keys):
    """pyprod's and kafka-python's timed loop: the bare send() (it blocks while the buffer
    is full, up to max_block_ms)."""
    if keys:
        def loop(count):
            ks = itertools.islice(itertools.cycle(keys), count)
            for c in _chunks(count, CHUNK):
                for k in itertools.islice(ks, c):
                    send(topic, value, k)
    else:
        def loop(count):
            for c in _chunks(count, CHUNK):
                for _ in range(c):
                    send(topic, value)
    return loop


def _produce_loop(produce, poll, room, topic, value, keys):
    """confluent-kafka's, the same shape, as its docs write it: produce() in try/except
    BufferError (the local queue is full: room() polls and retries), and poll(0) to serve
    delivery reports."""
    if keys:
        def loop(count):
            ks = itertools.islice(itertools.cycle(keys), count)
            for c in _chunks(count, CHUNK):
                for k in itertools.islice(ks, c):
                    try:
                        produce(topic, value, k)
                    except BufferError:
                        room(topic, value, k)
                poll(0)
    else:
        def loop(count):
            for c in _chunks(count, CHUNK):
                for _ in range(c):
                    try:
                        produce(topic, value)
                    except BufferError:
                        room(topic, value)
                poll(0)
    return loop


def _threads(fn, counts):
    """Run fn(count) on len(counts) threads started together; return when all are done."""
    if len(counts) == 1:
        fn(counts[0])
        return
    gate = threading.Barrier(len(counts))
    errors = []

    def body(c):
        gate.wait()
        try:
            fn(c)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            errors.append(e)
    ts = [threading.Thread(target=body, args=(c,)) for c in counts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


class _Delivered:
    """The callback on every record of 100B-callbacks, in each client's form: counts the
    acknowledged records, keeps the failures. Callbacks run on one thread (the client's I/O
    thread, poll()'s caller or the event loop)."""

    def __init__(self):
        self.ok, self.failed = 0, []

    def callback(self, metadata):  # pyprod, kafka-python (add_errback: failed.append)
        self.ok += 1

    def on_delivery(self, err, msg):  # confluent-kafka
        if err is None:
            self.ok += 1
        else:
            self.failed.append(err)

    def done(self, fut):  # aiokafka's asyncio futures
        if fut.exception() is None:
            self.ok += 1
        else:
            self.failed.append(fut.exception())

    def check(self, n, client):
        if self.ok != n or self.failed:
            raise RuntimeError(f"{client}: {self.ok} of {n} callbacks ran, "
                               f"{len(self.failed)} errbacks: {self.failed[:3]}")


def _paced(n, rate, send_one, sleep=time.sleep) -> float:
    """send_one(i) for i in range(n), offered at ``rate`` records/s; returns the seconds
    the sending took (the rate reached is n / that)."""
    pacer = Pacer(rate, sleep=sleep)
    step, i = pacer.step, 0
    pacer.begin()
    while i < n:
        j = min(n, i + step)
        for k in range(i, j):
            send_one(k)
        i = j
        pacer.wait(i)
    return time.perf_counter() - pacer.start


def _kafka_python_like(cls, spec, extra=None):
    """pyprod and kafka-python share one API: send(topic, value, key) -> future."""
    kw = dict(bootstrap_servers=spec["bootstrap"], acks=spec["acks"],
              linger_ms=spec["linger_ms"], compression_type=spec["compression"],
              enable_idempotence=spec["idempotent"])
    if spec["batch_size"]:
        kw["batch_size"] = spec["batch_size"]
    kw.update(spec.get("security_config") or {})
    kw.update(extra or {})
    txn = spec.get("transaction_size")
    if txn:
        kw["transactional_id"] = "bench-%s-%d" % (spec["client"], os.getpid())
    p = cls(**kw)
    topic, value, keys, n = spec["topic"], _value(spec["value_size"]), _keys(spec), spec["records"]
    if txn:
        p.init_transactions()
        p.begin_transaction()
    for f in [p.send(topic, value, partition=i) for i in range(spec["partitions"])]:
        f.get(30)  # warm: metadata, connections, every partition's leader answering
    if txn:
        p.commit_transaction()
    send, out = p.send, {}
    _gate(spec)
    c0, t0 = _cpu(), time.perf_counter()
    if spec["rate"]:
        rec, now = LatencyRecorder(), time.perf_counter

        def one(i):
            t = now()
            send(topic, value, keys[i % KEYS] if keys else None).add_both(rec.done, t)
        out["send_s"] = _paced(n, spec["rate"], one)
        out["latency"] = rec
    elif spec.get("callbacks"):
        delivered = _Delivered()
        callback, errback = delivered.callback, delivered.failed.append

        def loop(count):
            for c in _chunks(count, CHUNK):
                for _ in range(c):
                    send(topic, value).add_callback(callback).add_errback(errback)
        _threads(loop, _split(n, spec["threads"]))
    else:
        loop = _send_loop(send, topic, value, keys)
        if txn:
            for count in _chunks(n, txn):
                p.begin_transaction()
                loop(count)
                p.commit_transaction()
        else:
            _threads(loop, _split(n, spec["threads"]))
    p.flush()
    t1, c1 = time.perf_counter(), _cpu()
    p.close()
    if spec.get("callbacks") and not spec["rate"]:
        delivered.check(n, spec["client"])
    return t1 - t0, c1 - c0, out


def _run_pyprod(spec):
    from pyprod import KafkaProducer
    extra = {"buffer_memory": spec["buffer_memory"]} if spec.get("buffer_memory") else None
    wall, cpu, out = _kafka_python_like(KafkaProducer, spec, extra)
    return wall, cpu, out


def _run_kafka_python(spec):
    from kafka import KafkaProducer
    return _kafka_python_like(KafkaProducer, spec)


def confluent_room(produce, poll, full=None):
    """room(*args, **kw): produce() again once confluent-kafka's local queue has room (the rare
    path, out of the loop); full[0] counts the waits."""
    def room(*args, **kw):
        while True:
            if full is not None:
                full[0] += 1
            poll(0.001)  # serves delivery reports, which frees the queue
            try:
                return produce(*args, **kw)
            except BufferError:
                pass
    return room


def _run_confluent(spec):
    from confluent_kafka import Producer

    errors = []
    conf = {"bootstrap.servers": spec["bootstrap"], "acks": "all" if spec["acks"] == "all"
            else spec["acks"], "linger.ms": spec["linger_ms"],
            "enable.idempotence": spec["idempotent"], "error_cb": lambda e: errors.append(str(e))}
    if spec["compression"]:
        conf["compression.type"] = spec["compression"]
    if spec["batch_size"]:
        conf["batch.size"] = spec["batch_size"]
    if spec.get("security_config"):
        from tests.harness.readback import confluent_security
        conf.update(confluent_security(spec["security_config"]))
    txn = spec.get("transaction_size")
    if txn:
        conf["transactional.id"] = "bench-%s-%d" % (spec["client"], os.getpid())
    p = Producer(conf)
    topic, value, keys, n = spec["topic"], _value(spec["value_size"]), _keys(spec), spec["records"]
    if txn:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(spec["partitions"]):
        p.produce(topic, value, partition=i)
    if p.flush(30):
        raise RuntimeError("confluent-kafka: warm-up records not delivered")
    if txn:
        p.commit_transaction(30)
    produce, poll = p.produce, p.poll
    full = [0]
    room = confluent_room(produce, poll, full)
    out = {}
    _gate(spec)
    c0, t0 = _cpu(), time.perf_counter()
    if spec["rate"]:
        rec = LatencyRecorder()
        failed = []

        def on_delivery(err, msg):
            if err is None:
                rec.add(msg.latency())  # librdkafka's produce() -> acknowledgement time
            else:
                failed.append(err)

        def one(i):
            k = keys[i % KEYS] if keys else None
            try:
                produce(topic, value, k, on_delivery=on_delivery)
            except BufferError:
                room(topic, value, k, on_delivery=on_delivery)
        out["send_s"] = _paced(n, spec["rate"], one, sleep=poll)
        out["latency"] = rec
    elif spec.get("callbacks"):
        delivered = _Delivered()
        on_delivery = delivered.on_delivery

        def loop(count):
            for c in _chunks(count, CHUNK):
                for _ in range(c):
                    try:
                        produce(topic, value, on_delivery=on_delivery)
                    except BufferError:
                        room(topic, value, on_delivery=on_delivery)
                poll(0)  # runs the callbacks, as its users' loops do
        _threads(loop, _split(n, spec["threads"]))
    else:
        loop = _produce_loop(produce, poll, room, topic, value, keys)
        if txn:
            for count in _chunks(n, txn):
                p.begin_transaction()
                loop(count)
                p.commit_transaction()  # flushes first
        else:
            _threads(loop, _split(n, spec["threads"]))
    left = p.flush(300)
    t1, c1 = time.perf_counter(), _cpu()
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered after flush")
    if spec.get("callbacks") and not spec["rate"]:
        delivered.check(n, spec["client"])
    out.update(buffer_full_retries=full[0], errors=errors[:5])
    return t1 - t0, c1 - c0, out


def _run_aiokafka(spec):
    import asyncio
    from aiokafka import AIOKafkaProducer

    async def run():
        kw = dict(bootstrap_servers=spec["bootstrap"], acks=spec["acks"],
                  linger_ms=spec["linger_ms"], compression_type=spec["compression"],
                  enable_idempotence=spec["idempotent"])
        if spec["batch_size"]:
            kw["max_batch_size"] = spec["batch_size"]
        p = AIOKafkaProducer(**kw)
        await p.start()
        try:
            topic, value, keys = spec["topic"], _value(spec["value_size"]), _keys(spec)
            n = spec["records"]
            warm = [await p.send(topic, value, partition=i) for i in range(spec["partitions"])]
            await asyncio.gather(*warm)
            send, out = p.send, {}
            c0, t0 = _cpu(), time.perf_counter()
            if spec["rate"]:
                rec, now = LatencyRecorder(), time.perf_counter
                pacer = Pacer(spec["rate"])

                def done(t, fut):
                    rec.done(t, fut.exception() or fut.result())
                futs = []
                pacer.begin()
                for i in range(n):
                    t = now()
                    fut = await send(topic, value, keys[i % KEYS] if keys else None)
                    fut.add_done_callback(functools.partial(done, t))
                    futs.append(fut)
                    if i % pacer.step == 0:
                        delay = pacer.delay(i + 1)
                        if delay > 0:
                            await asyncio.sleep(delay)
                out.update(latency=rec, send_s=time.perf_counter() - pacer.start)
            else:
                # send() returns once the record is in a batch; its future completes on the
                # acknowledgement. Futures are awaited a window behind, so the pipeline
                # never drains while sending.
                futs, older = [], []
                delivered = _Delivered()
                for i in range(n):
                    futs.append(await send(topic, value, keys[i % KEYS] if keys else None))
                    if spec.get("callbacks"):
                        futs[-1].add_done_callback(delivered.done)
                    if len(futs) == 10_000:
                        await asyncio.gather(*older)
                        older, futs = futs, []
                futs += older
            await p.flush()
            await asyncio.gather(*futs)  # raises the first failure
            t1, c1 = time.perf_counter(), _cpu()
            if spec.get("callbacks") and not spec["rate"]:
                delivered.check(n, spec["client"])
            return t1 - t0, c1 - c0, out
        finally:
            await p.stop()
    return asyncio.run(run())


RUNNERS = {"pyprod": _run_pyprod, "kafka-python": _run_kafka_python,
           "confluent-kafka": _run_confluent, "aiokafka": _run_aiokafka}


def child_main(spec: dict) -> int:
    wall, cpu, out = RUNNERS[spec["client"]](spec)
    res = {"wall_s": wall, "cpu_s": cpu}
    rec = out.pop("latency", None)
    if rec is not None:
        res.update(latency_summary(rec.samples), latency_errors=rec.errors)
    res.update(out)
    print(json.dumps(res), flush=True)
    return 0
