"""Do the caller thread and the Sender both make progress, on two cores?

One caller thread runs a send() loop (100-byte values, keyless, acks=1, linger_ms=5, 6
partitions) against a local Apache Kafka broker. Over the loop it measures:

- wall time and process CPU time: CPU / wall > 1 means more than one core was busy;
- the caller thread's CPU (time.thread_time) and the CPU of each thread the producer started
  (the Sender; clock_gettime on the thread's CPU clock, or /proc/self/task/<tid>/stat);
- how many records were already acknowledged when the loop ended, i.e. the Sender's
  progress while the caller was still sending.

The same is measured for confluent-kafka, whose librdkafka threads run without the GIL, as a
reference for what two busy cores look like on this machine.

    python bench/gil_two_cores.py [--records 1000000] [--clients pyprod,confluent]
    python bench/gil_two_cores.py --broker mock --compression-type lz4

--broker mock runs librdkafka's mock cluster (in a child process) instead of Apache Kafka: it
stores batches without decoding them, so it leaves more of a small machine's CPU to the client.
--compression-type gives the Sender real work (compression runs in the Sender, without the GIL);
the values are 1000 distinct random payloads, so they do not compress to nothing.

Prints a per-interval table and a summary; --json writes the figures.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import pyprod  # noqa: F401
except ImportError:  # source checkout without an install
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import _mock_broker  # noqa: E402 (bench/_mock_broker.py; run as a script, bench/ is on the path)

PARTITIONS = 6
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tasks() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _task_name(tid: int) -> str:
    for t in threading.enumerate():
        if getattr(t, "native_id", None) == tid:
            return t.name
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return str(tid)


def _machine_cpu() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat), or nan."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (sum(v) - v[3] - v[4]) / _TICK  # all but idle and iowait
    except (OSError, ValueError, IndexError):
        return float("nan")


def _thread_clock(tid: int):
    """A function returning thread ``tid``'s CPU seconds."""
    for t in threading.enumerate():
        if getattr(t, "native_id", None) == tid and hasattr(time, "pthread_getcpuclockid"):
            clk = time.pthread_getcpuclockid(t.ident)
            return lambda: time.clock_gettime(clk)

    # not a Python thread (or no pthread clock): clock ticks from procfs
    return functools.partial(_mock_broker.stat_cpu, f"/proc/self/task/{tid}/stat")


class PyprodClient:
    """pyprod.KafkaProducer; acknowledged = sampled futures already done."""
    name = "pyprod"

    def __init__(self, bootstrap, topic, compression=None, api_version=None):
        from pyprod import KafkaProducer
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                                      compression_type=compression, api_version=api_version)
        self.topic = topic
        self.probes = []  # every 1000th future

    def warm(self, value):  # metadata, connection, every partition's leader answering
        for f in [self.producer.send(self.topic, value, partition=p) for p in range(PARTITIONS)]:
            f.get(30)
        self._sent0 = self.requests()

    def requests(self):
        """(ProduceRequests, batches) the Sender sent so far (beyond warm()'s)."""
        loop = self.producer._sender.produce_loop
        r, b = loop.requests, loop.batches
        r0, b0 = getattr(self, "_sent0", (0, 0))
        return r - r0, b - b0

    def send_range(self, values, start, stop):
        send, topic, probes, n = self.producer.send, self.topic, self.probes, len(values)
        for i in range(start, stop):
            f = send(topic, values[i % n])
            if i % 1000 == 0:
                probes.append(f)

    def acked(self, sent):
        return min(sent, sum(1 for f in self.probes if f.is_done) * 1000)

    def flush(self):
        self.producer.flush()

    def close(self):
        self.producer.close()


class ConfluentClient:
    """confluent-kafka (librdkafka threads, outside the GIL): the reference for 'two cores'."""
    name = "confluent"

    def __init__(self, bootstrap, topic, compression=None, api_version=None):
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                  "compression.type": compression or "none"})
        self.topic = topic

    def warm(self, value):
        for p in range(PARTITIONS):
            self.producer.produce(self.topic, value, partition=p)
        self.producer.flush(30)

    def send_range(self, values, start, stop):
        produce, poll, topic, n = self.producer.produce, self.producer.poll, self.topic, len(values)
        for i in range(start, stop):
            while True:
                try:
                    produce(topic, values[i % n])
                    break
                except BufferError:
                    poll(0.001)
            if i % 1000 == 0:
                poll(0)

    def acked(self, sent):
        return max(0, sent - len(self.producer))  # len = not yet delivered

    def requests(self):
        return None  # librdkafka's are in its statistics, not read here

    def flush(self):
        self.producer.flush(120)

    def close(self):
        pass


CLIENTS = {"pyprod": PyprodClient, "confluent": ConfluentClient}


def measure(bootstrap: str, topic: str, n: int, value_size: int = 100, step: int = 0,
            client: str = "pyprod", compression=None, api_version=None,
            broker_cpu=lambda: float("nan")) -> dict:
    before = _tasks()
    producer = CLIENTS[client](bootstrap, topic, compression, api_version)
    try:
        values = [os.urandom(value_size) for _ in range(1000)]
        producer.warm(values[0])
        threads = {tid: (_task_name(tid), _thread_clock(tid)) for tid in sorted(_tasks() - before)}
        step = step or max(1, n // 10)
        samples = []

        def sample(sent):
            samples.append({"sent": sent, "wall": time.perf_counter(), "cpu": time.process_time(),
                            "caller": time.thread_time(), "broker": broker_cpu(),
                            "machine": _machine_cpu(),
                            "threads": {tid: clk() for tid, (_, clk) in threads.items()}})

        sample(0)
        i = 0
        while i < n:
            stop = min(n, i + step)
            producer.send_range(values, i, stop)
            i = stop
            sample(i)
        acked_in_loop = producer.acked(n)
        producer.flush()
        sample(n)
        requests = producer.requests()
    finally:
        producer.close()

    s0, s_loop, s_end = samples[0], samples[-2], samples[-1]

    def span(a, b):
        wall = b["wall"] - a["wall"]
        thr = {tid: b["threads"][tid] - a["threads"][tid] for tid in threads}
        return {"wall_s": wall, "process_cpu_s": b["cpu"] - a["cpu"],
                "caller_cpu_s": b["caller"] - a["caller"],
                "thread_cpu_s": {f"{threads[t][0]} ({t})": v for t, v in thr.items()},
                "cores_busy": (b["cpu"] - a["cpu"]) / wall if wall > 0 else 0.0,
                "broker_cpu_s": b["broker"] - a["broker"],
                "machine_cores_busy": (b["machine"] - a["machine"]) / wall if wall > 0 else 0.0}

    return {
        "client": client, "records": n, "value_bytes": value_size, "compression": compression,
        "send_loop": span(s0, s_loop), "flush": span(s_loop, s_end), "total": span(s0, s_end),
        "records_per_s": n / (s_end["wall"] - s0["wall"]),
        "acked_before_loop_end": acked_in_loop,
        "requests": None if requests is None else {"produce_requests": requests[0],
                                                   "batches": requests[1]},
        "intervals": [dict(sent=b["sent"], **span(a, b)) for a, b in zip(samples, samples[1:])],
    }


def report(r: dict) -> str:
    lines = [f"### {r['client']}", "",
             "| interval | wall s | process CPU s | CPU/wall | caller thread CPU s | "
             "producer threads CPU s |", "|---|---:|---:|---:|---:|---:|"]
    sends = r["intervals"][:-1]  # the last interval is the flush
    starts = [0] + [iv["sent"] for iv in sends[:-1]]
    rows = [(f"send {a:,}..{iv['sent']:,}", iv) for a, iv in zip(starts, sends)]
    rows += [("flush", r["flush"]), ("**send loop**", r["send_loop"]), ("total", r["total"])]
    for label, iv in rows:
        lines.append(f"| {label} | {iv['wall_s']:.3f} | {iv['process_cpu_s']:.3f} | "
                     f"{iv['cores_busy']:.2f} | {iv['caller_cpu_s']:.3f} | "
                     f"{sum(iv['thread_cpu_s'].values()):.3f} |")
    loop = r["send_loop"]
    sender = sum(loop["thread_cpu_s"].values())
    busiest = sorted(loop["thread_cpu_s"].items(), key=lambda kv: -kv[1])[:4]
    lines += [
        "",
        f"{r['records']:,} records in {r['total']['wall_s']:.2f}s = {r['records_per_s']:,.0f} "
        f"records/s (send loop {loop['wall_s']:.2f}s, flush {r['flush']['wall_s']:.2f}s).",
        f"Send loop: process CPU {loop['process_cpu_s']:.2f}s over {loop['wall_s']:.2f}s wall "
        f"= **{loop['cores_busy']:.2f} cores busy**; caller thread {loop['caller_cpu_s']:.2f}s "
        f"CPU ({loop['caller_cpu_s'] / loop['wall_s']:.0%} of wall), the producer's threads "
        f"{sender:.2f}s ({sender / loop['wall_s']:.0%} of wall; "
        + ", ".join(f"{k} {v:.2f}s" for k, v in busiest)
        + f"); ~{r['acked_before_loop_end']:,} of {r['records']:,} records were acknowledged "
        "before the loop ended.",
        f"Meanwhile the broker used {loop['broker_cpu_s'] / loop['wall_s']:.2f} cores and the "
        f"whole machine {loop['machine_cores_busy']:.2f} of its {os.cpu_count()}.",
    ]
    req = r.get("requests")
    if req and req["produce_requests"]:
        lines.append(f"The Sender sent {req['produce_requests']:,} ProduceRequests "
                     f"({r['records'] / req['produce_requests']:,.0f} records each) carrying "
                     f"{req['batches']:,} batches ({r['records'] / max(req['batches'], 1):,.0f} "
                     "records each).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--clients", default="pyprod,confluent",
                    help="comma-separated, from " + ",".join(CLIENTS) + " (confluent-kafka's "
                    "librdkafka threads run outside the GIL: the reference for two busy cores)")
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka",
                    help="Apache Kafka (default) or librdkafka's mock cluster")
    ap.add_argument("--compression-type", choices=("gzip", "snappy", "lz4", "zstd"))
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if args.records <= 0:
        ap.error("--records must be positive")
    if not clients or any(c not in CLIENTS for c in clients):
        ap.error(f"--clients: choose from {', '.join(CLIENTS)}")
    cluster = None
    results = {}
    try:
        api_version = None
        broker_cpu = lambda: float("nan")  # noqa: E731 (a broker given by address)
        if args.broker == "mock":
            cluster = _mock_broker.MockBroker().start()
            broker_cpu, bootstrap = cluster.cpu_s, cluster.bootstrap
            api_version = _mock_broker.API_VERSION
            create = functools.partial(cluster.create, partitions=PARTITIONS)
        elif args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": bootstrap})

            def create(topic):
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                time.sleep(1.0)
        else:
            sys.path.insert(1, os.path.dirname(HERE))  # the repository root: tests.harness
            from tests.harness.kafka_cluster import KafkaCluster
            print("starting a 1-node Kafka broker ...", file=sys.stderr, flush=True)
            cluster = KafkaCluster(nodes=1).start()
            bootstrap = cluster.bootstrap_servers
            broker_cpu = functools.partial(cluster.cpu_seconds, 0)
            import compare  # bench/compare.py: warm the broker's JIT up first
            broker = compare.Broker(bootstrap)
            broker.cluster = cluster
            compare.warm_broker(broker, ["pyprod", "confluent-kafka"], ["100B"], 300_000)

            def create(topic):
                cluster.create_topic(topic, PARTITIONS)
        for c in clients:
            topic = f"gil-two-cores-{c}-{os.getpid()}"
            create(topic)
            results[c] = measure(bootstrap, topic, args.records, client=c,
                                 compression=args.compression_type, api_version=api_version,
                                 broker_cpu=broker_cpu)
    finally:
        if cluster is not None:
            cluster.stop()
    print("\n\n".join(report(r) for r in results.values()))
    print("\nTwo cores working in parallel shows as CPU/wall > 1 (caller + producer threads > "
          "wall). If the Sender ran only while the caller waited for the GIL, CPU/wall would "
          f"stay <= 1. The broker ({args.broker}) shares this machine's {os.cpu_count()} cores.")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"cpu_count": os.cpu_count(), "results": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
