"""Every producer on the same Apache Kafka broker, in one run: pyprod, kafka-python,
confluent-kafka, aiokafka and the Java producer (kafka-tools' ProducerPerformance).

For each workload (6 partitions; acks=1, linger_ms=5 and each client's default batch size
unless the workload says otherwise; one value of random upper-case letters, as Java's tool
uses) every client runs in its own subprocess, interleaved, >= 3 rounds with the order
rotated. A throughput run times the first send() until flush() returns; a separate paced run
offers 50,000 records/s and measures send()->callback latency (not for 100B-callbacks, whose
throughput run already has a callback on every record). Per client and workload:
median records/s and MB/s (2**20 bytes of values), CPU s per million records (the child's own
getrusage over the timed window; Java: the whole JVM from wait4), peak RSS (the child's
ru_maxrss) and the median p99 latency of the paced runs.

    python bench/compare.py                       # everything, 3 rounds (~15 min on 2 cores)
    python bench/compare.py --quick               # smoke run: 100k records, 2 workloads
    python bench/compare.py --clients pyprod,confluent-kafka --workloads 100B,lz4 --rounds 5

Writes bench/results/compare.json, compare.md and compare.png; rows of
bench/results/spark_sink.json (bench/spark_sink.py), if present, are merged in.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
try:
    import pyprod  # noqa: F401
except ImportError:  # a source checkout without an install
    sys.path.insert(0, os.path.join(REPO, "src"))
if REPO not in sys.path:  # tests.harness (read-back, the secured broker)
    sys.path.insert(1, REPO)

from pyprod.perf import LatencyRecorder, Pacer, latency_summary  # noqa: E402

MB = 1024 * 1024
PARTITIONS = 6
LINGER_MS = 5
LATENCY_RATE = 50_000
KEYS = 10_000  # distinct keys of the keyed workload

CLIENTS = ("pyprod", "confluent-kafka", "kafka-python", "aiokafka", "java")
ALIASES = {"confluent": "confluent-kafka", "kafka_python": "kafka-python"}
# records per run relative to --records: the slow Python clients run fewer
CLIENT_SHARE = {"kafka-python": 0.1, "aiokafka": 0.2}

WORKLOADS = {
    "100B": {"value_size": 100},
    "100B-keyed": {"value_size": 100, "keyed": True},
    "100B-callbacks": {"value_size": 100, "callbacks": True},
    "1KiB": {"value_size": 1024, "share": 0.25},
    "lz4": {"value_size": 100, "compression": "lz4"},
    "zstd": {"value_size": 100, "compression": "zstd"},
    "acks-all-idempotent": {"value_size": 100, "acks": "all", "idempotent": True},
    "sasl_ssl": {"value_size": 100, "security": "SASL_SSL"},
    "transactional": {"value_size": 100, "acks": "all", "idempotent": True,
                      "transaction_size": 10000},
}
QUICK_WORKLOADS = ("100B", "lz4")
DESCRIBE = {
    "100B": "100-byte values, keyless",
    "100B-keyed": f"100-byte values, {KEYS:,} distinct keys",
    "100B-callbacks": "100-byte values, keyless, a callback and an errback on every record "
                      "(confluent-kafka: on_delivery on every produce(), then poll(0))",
    "1KiB": "1 KiB values, keyless (a quarter of the records)",
    "lz4": "100-byte values, lz4",
    "zstd": "100-byte values, zstd",
    "acks-all-idempotent": "100-byte values, acks=all, idempotence on",
    "sasl_ssl": "100-byte values, keyless, SASL_SSL with SCRAM-SHA-512 (TLS 1.3)",
    "transactional": "100-byte values, keyless, transactions of 10,000 records, each "
                     "committed (acks=all, idempotence on)",
}
SKIP = {("java", "100B-keyed"): "ProducerPerformance sends no keys",
        ("java", "100B-callbacks"): "ProducerPerformance gives every record a callback: "
                                    "its 100B row",
        ("java", "sasl_ssl"): "not wired to the secured listener",
        ("aiokafka", "sasl_ssl"): "not wired to the secured listener",
        ("java", "transactional"): "ProducerPerformance is not run transactionally here",
        ("aiokafka", "transactional"): "not wired to transactions here"}


def workload_spec(name: str, batch_size=None) -> dict:
    w = WORKLOADS[name]
    return {"workload": name, "value_size": w["value_size"], "keyed": w.get("keyed", False),
            "compression": w.get("compression"), "acks": w.get("acks", 1),
            "idempotent": w.get("idempotent", False), "linger_ms": LINGER_MS,
            "batch_size": batch_size, "security": w.get("security"),
            "callbacks": w.get("callbacks", False),
            "transaction_size": w.get("transaction_size")}


# ---------------------------------------------------------------------------------------------
# the child: one client, one run, one JSON line on stdout

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
    elif keys:
        def loop(count):
            for k in itertools.islice(itertools.cycle(keys), count):
                send(topic, value, k)
        _threads(loop, _split(n, spec["threads"]))
    elif txn:
        for count in _chunks(n, txn):
            p.begin_transaction()
            for _ in range(count):
                send(topic, value)
            p.commit_transaction()
    elif spec.get("callbacks"):
        delivered = _Delivered()
        callback, errback = delivered.callback, delivered.failed.append

        def loop(count):
            for _ in range(count):
                send(topic, value).add_callback(callback).add_errback(errback)
        _threads(loop, _split(n, spec["threads"]))
    else:
        def loop(count):
            for _ in range(count):
                send(topic, value)
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

    def put(k, **kw):
        while True:
            try:
                produce(topic, value, k, **kw)
                return
            except BufferError:  # local queue full: serve delivery reports, retry
                full[0] += 1
                poll(0.001)
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
        out["send_s"] = _paced(n, spec["rate"], lambda i: put(
            keys[i % KEYS] if keys else None, on_delivery=on_delivery), sleep=poll)
        out["latency"] = rec
    elif txn:
        for count in _chunks(n, txn):
            p.begin_transaction()
            for i in range(count):
                put(None)
                if i % 1000 == 0:
                    poll(0)
            p.commit_transaction()  # flushes first
    elif spec.get("callbacks"):
        delivered = _Delivered()
        on_delivery = delivered.on_delivery

        def loop(count):
            for _ in range(count):
                put(None, on_delivery=on_delivery)
                poll(0)  # serves the delivery reports, as its users' loops do
        _threads(loop, _split(n, spec["threads"]))
    else:
        def loop(count):
            it = itertools.islice(itertools.cycle(keys), count) if keys else \
                itertools.repeat(None, count)
            for i, k in enumerate(it):
                put(k)
                if i % 1000 == 0:
                    poll(0)
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


# ---------------------------------------------------------------------------------------------
# the parent: processes, the broker, the Java tool

def run_measured(cmd, timeout, rss_every=None):
    """Run ``cmd``; stdout, stderr, exit code, CPU and peak RSS from its rusage (wait4), and
    with ``rss_every`` (s) a [(seconds, RSS MiB)] timeline read from /proc meanwhile."""
    timeline = []
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        start = time.monotonic()
        next_rss = start
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if now - start > timeout:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            if rss_every and now >= next_rss:
                rss = _rss_mib(proc.pid)
                if rss is not None:
                    timeline.append((round(now - start, 3), rss))
                next_rss = now + rss_every
            time.sleep(min(0.02, rss_every or 0.02))
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return {"stdout": fo.read().decode(errors="replace"),
                "stderr": fe.read().decode(errors="replace"),
                "rc": proc.returncode, "cpu_s": ru.ru_utime + ru.ru_stime,
                "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "rss_timeline": timeline,
                "timed_out": time.monotonic() - start > timeout}


def _rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_python_client(spec, timeout, rss_every=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    out = run_measured(cmd, timeout, rss_every)
    line = [s for s in out["stdout"].splitlines() if s.startswith("{")]
    if out["rc"] != 0 or not line:
        raise RuntimeError(f"{spec['client']} {spec['workload']} failed (exit {out['rc']}"
                           f"{', timed out' if out['timed_out'] else ''}):\n"
                           f"{out['stderr'][-3000:]}")
    res = json.loads(line[-1])
    res.update(process_cpu_s=out["cpu_s"], peak_rss_mb=out["peak_rss_mb"])
    if rss_every:
        res["rss_timeline"] = out["rss_timeline"]
    return res


_JAVA_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def run_java(spec, timeout):
    from pyprod.testing.kafka_libs import java_command

    props = [f"acks={spec['acks']}", f"linger.ms={spec['linger_ms']}",
             f"enable.idempotence={str(spec['idempotent']).lower()}"]
    if spec["compression"]:
        props.append(f"compression.type={spec['compression']}")
    if spec["batch_size"]:
        props.append(f"batch.size={spec['batch_size']}")
    cmd = java_command("org.apache.kafka.tools.ProducerPerformance",
                       "--topic", spec["topic"], "--num-records", str(spec["records"]),
                       "--record-size", str(spec["value_size"]),
                       "--throughput", str(spec["rate"] or -1),
                       "--bootstrap-server", spec["bootstrap"], "--command-property", *props,
                       heap="512m")
    out = run_measured(cmd, timeout)
    m = [x for x in _JAVA_FINAL.finditer(out["stdout"]) if int(x.group(1)) == spec["records"]]
    if out["rc"] != 0 or not m:
        raise RuntimeError(f"java {spec['workload']} failed (exit {out['rc']}):\n"
                           f"{(out['stdout'] + out['stderr'])[-3000:]}")
    m = m[-1]
    rate = float(m.group(2))
    # ProducerPerformance times its own send loop until close() has delivered everything,
    # with no warm-up; CPU is the whole JVM (startup and JIT included).
    res = {"wall_s": spec["records"] / rate, "cpu_s": out["cpu_s"], "process_cpu_s": out["cpu_s"],
           "peak_rss_mb": out["peak_rss_mb"], "cpu_is_whole_jvm": True}
    if spec["rate"]:
        res.update(avg_ms=float(m.group(3)), max_ms=float(m.group(4)), p50_ms=float(m.group(5)),
                   p99_ms=float(m.group(7)), p999_ms=float(m.group(8)))
    return res


class Broker:
    """The one Kafka broker of a run: started here (KafkaCluster) or given by address. With
    ``secured``, it is a SecureKafkaCluster: the same broker, plus a SASL_SSL listener."""

    def __init__(self, bootstrap=None, secured=False):
        self.cluster = None
        self.bootstrap = bootstrap
        self.secured = secured
        self._admin = None

    def __enter__(self):
        if not self.bootstrap:
            from pyprod.testing import KafkaCluster
            from tests.harness.security import SecureKafkaCluster
            print("starting a 1-node Kafka broker ...", file=sys.stderr, flush=True)
            self.cluster = (SecureKafkaCluster(kerberos=False) if self.secured
                            else KafkaCluster(nodes=1)).start()
            self.bootstrap = self.cluster.bootstrap_servers
        return self

    def client_address(self, spec):
        """(bootstrap, kafka-python security settings) for the workload's listener."""
        if not spec.get("security"):
            return self.bootstrap, None
        config = self.cluster.client_config(spec["security"], mechanism="SCRAM-SHA-512")
        return config.pop("bootstrap_servers"), config

    def __exit__(self, *exc):
        if self.cluster is not None:
            self.cluster.stop()

    def cpu_s(self):
        """The broker JVM's CPU seconds so far (None for a broker given by address)."""
        return None if self.cluster is None else self.cluster.cpu_seconds(0)

    def thread_cpu_s(self):
        """The same by JVM thread name (None for a broker given by address)."""
        return None if self.cluster is None else self.cluster.thread_cpu_seconds(0)

    def admin(self):
        if self.cluster is not None:
            return self.cluster.admin()
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create(self, name, partitions=PARTITIONS):
        if self.cluster is not None:
            self.cluster.create_topic(name, partitions)
            return
        from confluent_kafka.admin import NewTopic
        self.admin().create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        deadline = time.monotonic() + 30
        while True:  # every partition has a leader
            t = self.admin().list_topics(name, timeout=5).topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions and all(
                    p.leader >= 0 for p in t.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready")
            time.sleep(0.05)

    def count(self, topic) -> int:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap,
                      "group.id": "compare-" + uuid.uuid4().hex})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in md.partitions)
        finally:
            c.close()

    def delete(self, topic):
        try:
            self.admin().delete_topics([topic], operation_timeout=30)[topic].result(30)
        except Exception as e:  # noqa: BLE001 - a leftover topic only costs disk
            print(f"(could not delete {topic}: {e})", file=sys.stderr)


def run_one(broker, spec, timeout=None, rss_every=None) -> dict:
    """Create a topic, run one client on it, check every record landed, delete the topic."""
    bootstrap, security = broker.client_address(spec)
    spec = dict(spec, bootstrap=bootstrap, security_config=security,
                partitions=spec.get("partitions", PARTITIONS),
                threads=spec.get("threads", 1),
                topic=f"cmp-{spec['client']}-{spec['workload']}-{uuid.uuid4().hex[:8]}")
    broker.create(spec["topic"], spec["partitions"])
    timeout = timeout or 120 + spec["records"] / 5_000
    broker_cpu = broker.cpu_s()
    if spec["client"] == "java":
        res = run_java(spec, timeout)
    else:
        res = run_python_client(spec, timeout, rss_every)
    if broker_cpu is not None and broker.cpu_s() is not None:
        res["broker_cpu_s"] = broker.cpu_s() - broker_cpu  # the client's whole run
    warm = 0 if spec["client"] == "java" else spec["partitions"]
    landed = broker.count(spec["topic"])
    broker.delete(spec["topic"])
    markers = 0  # a transaction writes one commit marker per partition it touched
    if spec.get("transaction_size"):
        markers = spec["partitions"] * (len(_chunks(spec["records"], spec["transaction_size"]))
                                        + 1)
    if not spec["records"] + warm <= landed <= spec["records"] + warm + markers:
        raise RuntimeError(f"{spec['client']} {spec['workload']}: {landed} records in "
                           f"{spec['topic']}, expected {spec['records'] + warm}")
    res.update({k: spec[k] for k in ("client", "workload", "records", "value_size", "rate",
                                     "partitions", "threads")})
    return res


# ---------------------------------------------------------------------------------------------
# results: summary rows, Markdown, JSON, chart

def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": cpu, "cores": os.cpu_count(), "os": platform.platform(),
            "python": platform.python_version()}


def versions(clients) -> dict:
    import kcore
    import pyprod as pp
    from pyprod.testing.kafka_libs import DEFAULT_KAFKA_VERSION

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=REPO).stdout.strip()
    except OSError:
        commit = ""
    broker = os.environ.get("PYPROD_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    v = {"pyprod": pp.__version__ + (f" (git {commit}" if commit else " (")
         + (", compiled)" if kcore.EXTENSIONS else ", pure-python)"),
         "kafka_broker": broker}
    if "kafka-python" in clients:
        import kafka
        v["kafka-python"] = kafka.__version__
    if "confluent-kafka" in clients:
        import confluent_kafka
        v["confluent-kafka"] = f"{confluent_kafka.__version__} (librdkafka " \
                               f"{confluent_kafka.libversion()[0]})"
    if "aiokafka" in clients:
        import aiokafka
        v["aiokafka"] = aiokafka.__version__
    if "java" in clients:
        try:
            out = subprocess.run(["java", "-version"], capture_output=True, text=True)
            jvm = (out.stderr or out.stdout).splitlines()[0]
        except (OSError, IndexError):
            jvm = "java"
        v["java"] = f"kafka-tools {broker} ProducerPerformance on {jvm}"
    return v


def summarize(runs: list) -> list:
    """One row per (client, workload): medians over rounds (peak RSS: the largest)."""
    rows = []
    keys = sorted({(r["client"], r["workload"]) for r in runs},
                  key=lambda k: (_order(k[1], WORKLOADS), _order(k[0], CLIENTS)))
    for client, workload in keys:
        rs = [r for r in runs if r["client"] == client and r["workload"] == workload]
        thr = [r for r in rs if not r.get("rate")]
        lat = [r for r in rs if r.get("rate")]
        row = {"client": client, "workload": workload, "records": None, "rounds": len(thr),
               "records_per_s": None, "mb_per_s": None, "cpu_s_per_m": None,
               "peak_rss_mb": None, "p99_ms": None}
        if thr:
            rates = [r["records"] / r["wall_s"] for r in thr]
            med = statistics.median(rates)
            row.update(records=thr[0]["records"], records_per_s=med,
                       min_records_per_s=min(rates), max_records_per_s=max(rates),
                       mb_per_s=med * thr[0]["value_size"] / MB,
                       cpu_s_per_m=statistics.median(r["cpu_s"] / r["records"] * 1e6
                                                     for r in thr),
                       broker_cpu_s_per_m=statistics.median(
                           r["broker_cpu_s"] / r["records"] * 1e6 for r in thr)
                       if all("broker_cpu_s" in r for r in thr) else None,
                       peak_rss_mb=max(r["peak_rss_mb"] for r in thr))
        if lat:
            achieved = statistics.median(r["records"] / r.get("send_s", r["wall_s"])
                                         for r in lat)
            row.update(p99_ms=statistics.median(r["p99_ms"] for r in lat),
                       latency_rate=lat[0]["rate"], latency_achieved_per_s=achieved,
                       latency_saturated=achieved < 0.95 * lat[0]["rate"])
        if client == "java":
            row["cpu_is_whole_jvm"] = True
        rows.append(row)
    return rows


def _order(name, known):
    known = list(known)
    return (known.index(name), name) if name in known else (len(known), name)


def merge_spark(rows: list, meta: dict, path: str) -> list:
    """Rows of spark_sink.json appended (labelled if measured on another date)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return rows
    if not isinstance(data, list):
        return rows
    smeta = next((d["meta"] for d in data if isinstance(d, dict) and "meta" in d), {}) or {}
    sdate = str(smeta.get("date", ""))[:10]
    separate = sdate != str(meta.get("date", ""))[:10]
    out = list(rows)
    for d in data:
        if not isinstance(d, dict) or "meta" in d or "client" not in d:
            continue
        row = {k: d.get(k) for k in ("client", "workload", "records", "records_per_s",
                                     "mb_per_s", "cpu_s_per_m", "peak_rss_mb", "p99_ms")}
        row["source"] = "spark_sink.json"
        if separate:
            row["measured_separately"] = sdate or "unknown date"
        out.append(row)
    return out


def _label(row) -> str:
    name = row["client"]
    if row.get("measured_separately"):
        name += f" (measured separately, {row['measured_separately']})"
    return name


def _num(v, fmt):
    return "—" if v is None else format(v, fmt)


def markdown(meta: dict, rows: list) -> str:
    m = meta["machine"]
    lines = [f"# Producer comparison, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python {m['python']}.",
             "Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "",
             f"One Apache Kafka broker on the same machine; {PARTITIONS} partitions, acks=1, "
             f"linger_ms={LINGER_MS}, each client's default batch size unless the workload says "
             f"otherwise. Medians of {meta['rounds']} interleaved rounds, each run in its own "
             "process. p99 is send()->callback latency at an offered "
             f"{LATENCY_RATE:,} records/s (a separate paced run). MB = 2^20 bytes of values.",
             "", "| workload | client | records | records/s (min..max) | MB/s | CPU s / M records "
             "| broker CPU s / M | peak RSS MB | p99 ms @ 50k/s | pyprod / client |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    same_run = {(r["client"], r["workload"]): r for r in rows if not r.get("source")}
    for r in rows:
        rate = _num(r.get("records_per_s"), ",.0f")
        if r.get("min_records_per_s") is not None:
            rate += f" ({r['min_records_per_s']:,.0f}..{r['max_records_per_s']:,.0f})"
        cpu = _num(r.get("cpu_s_per_m"), ".2f") + (" \\*" if r.get("cpu_is_whole_jvm") else "")
        p99 = _num(r.get("p99_ms"), ".1f")
        if r.get("latency_saturated"):
            p99 += f" † ({r['latency_achieved_per_s']:,.0f}/s)"
        ratio = "—"
        mine = same_run.get(("pyprod", r["workload"]))
        if (mine and r["client"] != "pyprod" and not r.get("source")
                and mine.get("records_per_s") and r.get("records_per_s")):
            ratio = f"{mine['records_per_s'] / r['records_per_s']:.2f}x"
        records = _num(r.get("records"), ",")
        lines.append(f"| {r['workload']} | {_label(r)} | {records} | {rate} | "
                     f"{_num(r.get('mb_per_s'), '.1f')} | {cpu} | "
                     f"{_num(r.get('broker_cpu_s_per_m'), '.2f')} | "
                     f"{_num(r.get('peak_rss_mb'), '.0f')} | {p99} | {ratio} |")
    notes = ["", "Broker CPU: what the broker's JVM used during the client's run, per million "
             "records; broker and clients share the machine's cores."]
    if any(r.get("cpu_is_whole_jvm") for r in rows):
        notes.append("\\* Java: CPU of the whole JVM process (startup and JIT included); "
                     "ProducerPerformance times its own send loop with no warm-up.")
    if any(r.get("latency_saturated") for r in rows):
        notes.append("† The client could not offer 50,000 records/s: its p99 includes "
                     "queueing; the rate it reached is in brackets.")
    shares = ", ".join(f"{c} {s:g}x" for c, s in CLIENT_SHARE.items())
    notes.append(f"Records per run: --records for pyprod, confluent-kafka and Java; {shares} of "
                 "that for the slower clients; 1KiB workloads a quarter.")
    for w, why in meta.get("skipped", {}).items():
        notes.append(f"Not run: {w}: {why}.")
    if any(r.get("source") for r in rows):
        notes.append("Rows from spark_sink.json come from bench/spark_sink.py"
                     + (" and were measured separately (another date)."
                        if any(r.get("measured_separately") for r in rows) else "."))
    return "\n".join(lines + notes) + "\n"


def chart(meta: dict, rows: list, path: str) -> None:
    """Bars per workload and client: records/s (log), CPU s per M records, p99 at 50k/s."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted({r["workload"] for r in rows}, key=lambda w: _order(w, WORKLOADS))
    labels = sorted({_label(r) for r in rows},
                    key=lambda c: _order(c.split(" (")[0], CLIENTS))
    panels = [("records_per_s", "records/s (log)"),
              ("cpu_s_per_m", "CPU s / M records (log;\nJava: whole JVM)"),
              ("p99_ms", "p99 ms at 50k records/s (log;\nhatched: rate not reached)")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 1.6 * len(workloads)), 11))
    width = 0.8 / max(1, len(labels))
    colors = plt.get_cmap("tab10")
    for ax, (key, title) in zip(axes, panels):
        for ci, lab in enumerate(labels):
            for wi, w in enumerate(workloads):
                r = next((r for r in rows if r["workload"] == w and _label(r) == lab), None)
                if r is not None and r.get(key):
                    hatch = "//" if key == "p99_ms" and r.get("latency_saturated") else None
                    ax.bar(wi + (ci - (len(labels) - 1) / 2) * width, r[key], width,
                           color=colors(ci % 10), hatch=hatch, edgecolor="white")
        ax.set_xticks(range(len(workloads)))
        ax.set_xlim(-0.5, len(workloads) - 0.5)
        ax.set_xticklabels([textwrap.fill(w.replace("-", "- "), 12).replace("- ", "-")
                            for w in workloads], fontsize=8)
        ax.set_ylabel(title, fontsize=9)
        ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors(i % 10)) for i in range(len(labels))]
    fig.legend(handles, labels, loc="upper center", ncol=min(5, len(labels)), fontsize=8,
               bbox_to_anchor=(0.5, 0.965))
    save_chart(fig, meta, "Kafka producers on one broker", path, rect=(0, 0.04, 1, 0.94))


def save_chart(fig, meta: dict, title: str, path: str, rect) -> None:
    """Title with the date and machine, a footer with every version; save as PNG and close."""
    import matplotlib.pyplot as plt

    m = meta["machine"]
    fig.suptitle(f"{title}, {meta['date'][:10]}: {m['cpu_model']}, {m['cores']} cores",
                 fontsize=10)
    fig.text(0.01, 0.005, "; ".join(f"{k} {v}" for k, v in meta["versions"].items()),
             fontsize=6, wrap=True)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(meta, runs, rows, out_dir, name="compare", with_chart=True) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    paths = {"json": os.path.join(out_dir, name + ".json"),
             "md": os.path.join(out_dir, name + ".md")}
    with open(paths["json"], "w") as f:
        json.dump({"meta": meta, "rows": rows, "runs": runs}, f, indent=2)
        f.write("\n")
    with open(paths["md"], "w") as f:
        f.write(markdown(meta, rows))
    if with_chart:
        paths["png"] = os.path.join(out_dir, name + ".png")
        chart(meta, rows, paths["png"])
    return paths


# ---------------------------------------------------------------------------------------------
# main

def _names(ap, text, known, what, aliases=None):
    out = []
    for n in (s.strip() for s in text.split(",")):
        if not n:
            continue
        n = (aliases or {}).get(n, n)
        if n not in known:
            ap.error(f"unknown {what} {n!r}; choose from {', '.join(known)}")
        if n not in out:
            out.append(n)
    if not out:
        ap.error(f"no {what} given")
    return out


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--workloads", default=None,
                    help="comma-separated subset of " + ",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=None,
                    help="records per throughput run (default 1,000,000; --quick 100,000)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: 100k records, workloads {','.join(QUICK_WORKLOADS)}, "
                         "1 s paced runs")
    ap.add_argument("--no-java", dest="java", action="store_false")
    ap.add_argument("--no-latency", dest="latency", action="store_false",
                    help="skip the paced 50k records/s runs")
    ap.add_argument("--latency-seconds", type=float, default=None,
                    help="length of each paced run (default 5; --quick 1)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="one batch size for every client (default: each client's own)")
    ap.add_argument("--broker-warmup", type=int, default=None,
                    help="records per untimed warm-up run (default min(records, 300000)); "
                         "warm-up passes repeat until the broker's JIT settles; 0: none")
    ap.add_argument("--out-dir", default=RESULTS)
    ap.add_argument("--name", default="compare", help="result file names (NAME.json ...)")
    ap.add_argument("--no-chart", dest="chart", action="store_false")
    ap.add_argument("--spark", default=os.path.join(RESULTS, "spark_sink.json"),
                    help="spark_sink.json rows to merge ('' = none)")
    ap.add_argument("--replot", action="store_true",
                    help="no runs: rebuild NAME.md/.png from NAME.json (re-merging --spark)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap


def plan(args, clients, workloads) -> tuple:
    """The runs of one round in order, as specs without topic/bootstrap; the skipped pairs."""
    n = args.records or (100_000 if args.quick else 1_000_000)
    secs = args.latency_seconds or (1.0 if args.quick else 5.0)
    specs, skipped = [], {}
    for w in workloads:
        for c in clients:
            if (c, w) in SKIP:
                skipped[f"{c} / {w}"] = SKIP[(c, w)]
                continue
            base = dict(workload_spec(w, args.batch_size), client=c)
            count = max(1, int(n * CLIENT_SHARE.get(c, 1) * WORKLOADS[w].get("share", 1)))
            specs.append(dict(base, records=count, rate=None))
            if args.latency and not base["callbacks"]:  # paced runs have callbacks anyway
                specs.append(dict(base, records=max(1, int(LATENCY_RATE * secs)),
                                  rate=LATENCY_RATE))
    return specs, skipped, n


def replot(args) -> int:
    """Tables and chart again from the runs of an earlier NAME.json."""
    path = os.path.join(args.out_dir, args.name + ".json")
    try:
        with open(path) as f:
            data = json.load(f)
        meta, runs = data["meta"], data["runs"]
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot replot from {path}: {e!r}", file=sys.stderr)
        return 1
    rows = summarize(runs)
    if args.spark:
        rows = merge_spark(rows, meta, args.spark)
    paths = write_results(meta, runs, rows, args.out_dir, args.name, args.chart)
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0


JIT_SETTLED = 0.10  # the broker's JIT compilers used < 10% of its CPU in a warm-up pass
WARMUP_PASSES = 8


def warm_broker(broker, clients, workloads, records, batch_size=None) -> None:
    """Untimed runs of pyprod and confluent-kafka (those being measured) on every workload, in
    passes, until the broker's JIT compiler threads settle: a fresh broker spends most of its
    CPU compiling for the first million records or so, which would tax the first runs. A
    broker given by address gets one pass (its threads cannot be read)."""
    warmers = [c for c in ("confluent-kafka", "pyprod") if c in clients] or ["confluent-kafka"]
    before = broker.thread_cpu_s()
    for n in range(1, WARMUP_PASSES + 1):
        for w in workloads:
            for c in warmers:
                count = max(1, int(records * WORKLOADS[w].get("share", 1)))
                run_one(broker, dict(workload_spec(w, batch_size), client=c, workload="warmup",
                                     records=count, rate=None))
        after = broker.thread_cpu_s()
        if before is None or after is None:
            print(f"warmed the broker up: one pass of {records:,} records per client and "
                  "workload (untimed)", file=sys.stderr, flush=True)
            return
        used = {k: v - before.get(k, 0.0) for k, v in after.items()}
        total = sum(used.values()) or 1.0
        jit = sum(v for k, v in used.items() if "Compiler" in k) / total
        print(f"broker warm-up pass {n}: JIT compilers used {jit:.0%} of the broker's CPU",
              file=sys.stderr, flush=True)
        if jit < JIT_SETTLED:
            return
        before = after


def _rotate(seq, k):
    k %= max(1, len(seq))
    return seq[k:] + seq[:k]


def main(argv=None, command=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.child:
        return child_main(json.loads(args.child))
    if args.replot:
        return replot(args)
    if args.rounds <= 0:
        ap.error("--rounds must be positive")
    for opt in ("records", "batch_size", "latency_seconds"):
        v = getattr(args, opt)
        if v is not None and v <= 0:
            ap.error(f"--{opt.replace('_', '-')} must be positive")
    if args.broker_warmup is not None and args.broker_warmup < 0:
        ap.error("--broker-warmup must be >= 0")
    clients = _names(ap, args.clients, CLIENTS, "client", ALIASES)
    if not args.java and "java" in clients:
        clients.remove("java")
    if not clients:
        ap.error("no clients left to run")
    workloads = _names(ap, args.workloads or ",".join(
        QUICK_WORKLOADS if args.quick else WORKLOADS), list(WORKLOADS), "workload")
    specs, skipped, n = plan(args, clients, workloads)

    runs = []
    t_start = time.monotonic()
    secured = any(WORKLOADS[w].get("security") for w in workloads)
    if secured and args.bootstrap_servers:
        ap.error("the sasl_ssl workload needs the broker compare.py starts (no --bootstrap-servers)")
    with Broker(args.bootstrap_servers, secured) as broker:
        warm = min(n, 300_000) if args.broker_warmup is None else args.broker_warmup
        if warm:
            warm_broker(broker, clients, workloads, warm, args.batch_size)
        for rnd in range(args.rounds):
            for w in workloads:
                for kind in (False, True):  # throughput runs, then the paced ones
                    batch = [s for s in specs if s["workload"] == w and bool(s["rate"]) == kind]
                    for spec in _rotate(batch, rnd):
                        res = run_one(broker, spec)
                        res["round"] = rnd
                        runs.append(res)
                        what = (f"p99 {res['p99_ms']:.1f} ms at {spec['rate']:,}/s"
                                if spec["rate"] else
                                f"{res['records'] / res['wall_s']:,.0f} records/s, "
                                f"{res['cpu_s'] / res['records'] * 1e6:.2f} CPU s/M" + (
                                    f", broker {res['broker_cpu_s'] / res['records'] * 1e6:.2f}"
                                    if "broker_cpu_s" in res else ""))
                        print(f"round {rnd + 1}/{args.rounds} {w:>20} {spec['client']:>15}: "
                              f"{what}", file=sys.stderr, flush=True)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": command or " ".join(["python bench/compare.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": machine_info(), "versions": versions(clients), "rounds": args.rounds,
            "records": n, "workloads": {w: DESCRIBE[w] for w in workloads},
            "latency_rate": LATENCY_RATE if args.latency else None, "skipped": skipped,
            "elapsed_s": round(time.monotonic() - t_start, 1),
            "load_average": os.getloadavg()}
    rows = summarize(runs)
    if args.spark:
        rows = merge_spark(rows, meta, args.spark)
    paths = write_results(meta, runs, rows, args.out_dir, args.name, args.chart)
    print(markdown(meta, rows))
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
