"""Producer throughput: pyprod vs confluent-kafka vs kafka-python (and the Java producer).

Workload (issue 3, section 4): send() from one Python thread, 100-byte values, keyless,
acks=1, linger_ms=5, 6 partitions, timed from the first send until flush() returns (every
record acknowledged). One Apache Kafka broker for the whole run; the clients are interleaved,
>= 3 rounds each with the order rotated, each run in its own subprocess so its process CPU
(resource.getrusage inside the child, over the timed window; librdkafka's and the Sender's
threads included) gives CPU seconds per million records.

    python bench/producer_peers.py                # 1M records (kafka-python: 100k), 3 rounds
    python bench/producer_peers.py --quick        # 200k records, 3 rounds, no Java
    python bench/producer_peers.py --bootstrap-servers 127.0.0.1:9092

Prints a Markdown table; writes bench/results/producer_peers.json (and .md).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
try:
    import pyprod  # noqa: F401
except ImportError:  # running from a source checkout without an install
    sys.path.insert(0, os.path.join(REPO, "src"))

VALUE_SIZE = 100
PARTITIONS = 6
LINGER_MS = 5
CLIENTS = ("pyprod", "confluent", "kafka-python")
BATCH_SIZE = None  # --batch-size: one batch size for every client (default: each client's own)


def _batch_kw() -> dict:
    return {} if BATCH_SIZE is None else {"batch_size": BATCH_SIZE}


# ---------------------------------------------------------------------------------------------
# the child: one client, one timed run, one JSON line on stdout

def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _run_pyprod(bootstrap, topic, n, value):
    from pyprod import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                      **_batch_kw())
    for f in [p.send(topic, value, partition=i) for i in range(PARTITIONS)]:
        f.get(30)  # warm: metadata, connections, every partition's leader answering
    send = p.send
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(n):
        send(topic, value)
    p.flush()
    t1, c1 = time.perf_counter(), _cpu()
    p.close()
    return t1 - t0, c1 - c0, {}


def _run_kafka_python(bootstrap, topic, n, value):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=LINGER_MS,
                      **_batch_kw())
    for f in [p.send(topic, value, partition=i) for i in range(PARTITIONS)]:
        f.get(30)
    send = p.send
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(n):
        send(topic, value)
    p.flush()
    t1, c1 = time.perf_counter(), _cpu()
    p.close()
    return t1 - t0, c1 - c0, {}


def _run_confluent(bootstrap, topic, n, value):
    from confluent_kafka import Producer

    errors = []

    def on_error(err):
        errors.append(str(err))

    conf = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": LINGER_MS,
            "error_cb": on_error}
    if BATCH_SIZE is not None:
        conf["batch.size"] = BATCH_SIZE
    p = Producer(conf)
    for i in range(PARTITIONS):
        p.produce(topic, value, partition=i)
    if p.flush(30):
        raise RuntimeError("confluent-kafka: warm-up records not delivered")
    produce, poll = p.produce, p.poll
    full = 0
    c0, t0 = _cpu(), time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # local queue full: serve delivery reports, retry
                full += 1
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    left = p.flush(120)
    t1, c1 = time.perf_counter(), _cpu()
    if left:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered after flush")
    return t1 - t0, c1 - c0, {"buffer_full_retries": full, "errors": errors[:5]}


RUNNERS = {"pyprod": _run_pyprod, "kafka-python": _run_kafka_python,
           "confluent": _run_confluent}


def child_main(client, bootstrap, topic, n) -> int:
    value = os.urandom(VALUE_SIZE)
    wall, cpu, extra = RUNNERS[client](bootstrap, topic, n, value)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"client": client, "records": n, "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mib": round(peak_kib / 1024, 1), **extra}), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# the parent

def _run_python_child(client, bootstrap, topic, n, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", client,
           "--bootstrap-servers", bootstrap, "--topic", topic, "--records", str(n)]
    if BATCH_SIZE is not None:
        cmd += ["--batch-size", str(BATCH_SIZE)]
    out = _run_measured(cmd, timeout)
    line = [s for s in out["stdout"].splitlines() if s.startswith("{")]
    if out["rc"] != 0 or not line:
        raise RuntimeError(f"{client} run failed (exit {out['rc']}):\n{out['stderr'][-3000:]}")
    res = json.loads(line[-1])
    res["process_cpu_s"] = out["cpu_s"]  # whole child: imports, connect, warm-up, close
    return res


def _run_measured(cmd, timeout):
    """Run ``cmd``; return stdout, stderr, exit code and its rusage CPU (os.wait4)."""
    import tempfile
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return {"stdout": fo.read().decode(errors="replace"),
                "stderr": fe.read().decode(errors="replace"),
                "rc": proc.returncode, "cpu_s": ru.ru_utime + ru.ru_stime,
                "peak_rss_mib": round(ru.ru_maxrss / 1024, 1)}


_JAVA_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")


def _run_java(bootstrap, topic, n, timeout):
    from pyprod.testing.kafka_cluster import java_command

    cmd = java_command("org.apache.kafka.tools.ProducerPerformance",
                       "--topic", topic, "--num-records", str(n), "--record-size",
                       str(VALUE_SIZE), "--throughput", "-1", "--bootstrap-server", bootstrap,
                       "--command-property", "acks=1", f"linger.ms={LINGER_MS}",
                       *([] if BATCH_SIZE is None else [f"batch.size={BATCH_SIZE}"]),
                       heap="512m")
    out = _run_measured(cmd, timeout)
    m = [x for x in _JAVA_LINE.finditer(out["stdout"]) if int(x.group(1)) == n]
    if out["rc"] != 0 or not m:
        raise RuntimeError(f"java run failed (exit {out['rc']}):\n"
                           f"{(out['stdout'] + out['stderr'])[-3000:]}")
    rate = float(m[-1].group(2))
    # ProducerPerformance times its own send loop (ending when close() has delivered all),
    # without a warm-up; CPU is the whole JVM, startup and JIT included: both understate Java.
    return {"client": "java", "records": n, "wall_s": n / rate, "cpu_s": out["cpu_s"],
            "process_cpu_s": out["cpu_s"], "peak_rss_mib": out["peak_rss_mib"],
            "cpu_includes_jvm_startup": True}


def _end_offsets(bootstrap, topic) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "peers-" + uuid.uuid4().hex})
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in md.partitions)
    finally:
        c.close()


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


def versions(with_java: bool) -> dict:
    import confluent_kafka
    import kafka
    import kcore
    import pyprod  # noqa: F811
    from pyprod.testing.kafka_cluster import DEFAULT_KAFKA_VERSION

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(pyprod.__file__)).stdout.strip()
    except OSError:
        commit = ""
    v = {"pyprod": pyprod.__version__ + (f" (git {commit})" if commit else ""),
         "pyprod_kernels": "compiled" if kcore.EXTENSIONS else "pure-python",
         "kafka-python": kafka.__version__,
         "confluent-kafka": confluent_kafka.__version__,
         "librdkafka": confluent_kafka.libversion()[0],
         "kafka_broker": os.environ.get("PYPROD_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION}
    if with_java:
        v["java_producer"] = v["kafka_broker"] + " (kafka-tools ProducerPerformance)"
        try:
            out = subprocess.run(["java", "-version"], capture_output=True, text=True)
            v["java"] = (out.stderr or out.stdout).splitlines()[0]
        except (OSError, IndexError):
            pass
    return v


def summarize(runs: list, clients: list) -> dict:
    summary = {}
    for c in clients:
        rs = [r for r in runs if r["client"] == c]
        if not rs:
            continue
        rates = [r["records"] / r["wall_s"] for r in rs]
        cpus = [r["cpu_s"] / r["records"] * 1e6 for r in rs]
        summary[c] = {"records": rs[0]["records"], "rounds": len(rs),
                      "records_per_s": statistics.median(rates),
                      "min_records_per_s": min(rates), "max_records_per_s": max(rates),
                      "mb_per_s": statistics.median(rates) * VALUE_SIZE / 1e6,
                      "cpu_s_per_million": statistics.median(cpus),
                      "peak_rss_mib": max(r.get("peak_rss_mib", 0) for r in rs)}
    p = summary.get("pyprod")
    ratios = {}
    if p:
        for peer in ("confluent", "kafka-python", "java"):
            if peer in summary:
                ratios[f"pyprod/{peer}"] = {
                    "throughput": p["records_per_s"] / summary[peer]["records_per_s"],
                    "cpu_per_record": p["cpu_s_per_million"] / summary[peer]["cpu_s_per_million"]}
    return {"clients": summary, "ratios": ratios}


NAMES = {"pyprod": "pyprod", "confluent": "confluent-kafka", "kafka-python": "kafka-python",
         "java": "Java producer"}
TARGETS = {"confluent": 3.0, "kafka-python": 50.0}


def markdown(result: dict) -> str:
    s, ratios = result["summary"]["clients"], result["summary"]["ratios"]
    lines = ["| client | records | median records/s | min..max | MB/s | CPU s / M records "
             "| pyprod throughput ratio |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for c, row in s.items():
        r = ratios.get(f"pyprod/{c}")
        ratio = "—" if r is None else f"{r['throughput']:.2f}x"
        if r is not None and c in TARGETS:
            ratio += f" (target >= {TARGETS[c]:g}x)"
        cpu = f"{row['cpu_s_per_million']:.2f}" + (" *" if c == "java" else "")
        lines.append(f"| {NAMES[c]} | {row['records']:,} | {row['records_per_s']:,.0f} | "
                     f"{row['min_records_per_s']:,.0f}..{row['max_records_per_s']:,.0f} | "
                     f"{row['mb_per_s']:.1f} | {cpu} | {ratio} |")
    m, v = result["machine"], result["versions"]
    lines.append("")
    lines.append(f"{result['date']}, {m['cpu_model']}, {m['cores']} cores, Python {m['python']}; "
                 + ", ".join(f"{k} {val}" for k, val in v.items()) + ". "
                 + f"Workload: {VALUE_SIZE}-byte values, keyless, acks=1, linger_ms={LINGER_MS}, "
                 f"{PARTITIONS} partitions, batch size "
                 f"{result['workload']['batch_size']}, median of {result['rounds']} "
                 "interleaved rounds.")
    if "java" in s:
        lines.append("\n\\* Java CPU is the whole JVM process (startup and JIT included).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--records", type=int, default=None,
                    help="records per run (default 1,000,000; kafka-python gets a tenth)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200k records, no Java")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--java", dest="java", action="store_true", default=None,
                    help="also run Java's ProducerPerformance (default: on unless --quick)")
    ap.add_argument("--no-java", dest="java", action="store_false")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="batch size in bytes for every client (default: each client's own "
                         "default: 16384 for pyprod, kafka-python and Java, 1000000 for "
                         "librdkafka)")
    ap.add_argument("--broker-warmup", type=int, default=None,
                    help="untimed confluent-kafka records first, so the broker's JIT is warm "
                         "(default min(records, 300000); 0 = none)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "producer_peers.json"))
    ap.add_argument("--child", choices=CLIENTS, help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global BATCH_SIZE
    BATCH_SIZE = args.batch_size
    if BATCH_SIZE is not None and BATCH_SIZE <= 0:
        ap.error("--batch-size must be positive")
    if args.child:
        return child_main(args.child, args.bootstrap_servers, args.topic, args.records)

    n = args.records or (200_000 if args.quick else 1_000_000)
    if n <= 0 or args.rounds <= 0:
        ap.error("--records and --rounds must be positive")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    bad = [c for c in clients if c not in CLIENTS]
    if bad:
        ap.error(f"unknown client(s) {bad}; choose from {', '.join(CLIENTS)}")
    use_java = (not args.quick) if args.java is None else args.java
    if use_java:
        clients.append("java")
    counts = {c: (max(1, n // 10) if c == "kafka-python" else n) for c in clients}

    cluster = None
    bootstrap = args.bootstrap_servers
    if not bootstrap:
        from pyprod.testing import KafkaCluster
        print("starting a 1-node Kafka broker ...", file=sys.stderr, flush=True)
        cluster = KafkaCluster(nodes=1).start()
        bootstrap = cluster.bootstrap_servers
    runs = []
    try:
        if cluster is None:
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": bootstrap})

            def create(name):
                admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
                time.sleep(1.0)  # let leaders settle
        else:
            def create(name):
                cluster.create_topic(name, PARTITIONS)
        broker_warm = min(n, 300_000) if args.broker_warmup is None else args.broker_warmup
        if broker_warm > 0:
            topic = f"peers-warmup-{uuid.uuid4().hex[:6]}"
            create(topic)
            print(f"warming the broker up with {broker_warm:,} records (untimed) ...",
                  file=sys.stderr, flush=True)
            _run_python_child("confluent", bootstrap, topic, broker_warm, 300)
        for rnd in range(args.rounds):
            order = clients[rnd % len(clients):] + clients[:rnd % len(clients)]
            for c in order:
                topic = f"peers-{c}-{rnd}-{uuid.uuid4().hex[:6]}"
                create(topic)
                timeout = 120 + counts[c] / 5_000
                if c == "java":
                    res = _run_java(bootstrap, topic, counts[c], timeout)
                else:
                    res = _run_python_child(c, bootstrap, topic, counts[c], timeout)
                warm = 0 if c == "java" else PARTITIONS
                landed = _end_offsets(bootstrap, topic)
                if landed != counts[c] + warm:
                    raise RuntimeError(f"{c}: {landed} records in {topic}, expected "
                                       f"{counts[c] + warm}")
                res["round"] = rnd
                runs.append(res)
                print(f"round {rnd + 1}/{args.rounds} {NAMES[c]:>16}: "
                      f"{res['records'] / res['wall_s']:>11,.0f} records/s, "
                      f"{res['cpu_s'] / res['records'] * 1e6:6.2f} CPU s/M",
                      file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.stop()

    result = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
              "command": "python bench/producer_peers.py " + " ".join(sys.argv[1:] if argv is None
                                                                      else argv),
              "machine": machine_info(), "versions": versions(use_java),
              "workload": {"value_bytes": VALUE_SIZE, "keyed": False, "acks": 1,
                           "linger_ms": LINGER_MS, "partitions": PARTITIONS,
                           "batch_size": BATCH_SIZE or "each client's default",
                           "timed": "first send() until flush() returns"},
              "rounds": args.rounds, "runs": runs, "summary": summarize(runs, clients)}
    table = markdown(result)
    print(table)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write(table + "\n")
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
