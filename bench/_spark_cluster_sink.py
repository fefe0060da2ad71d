"""bench/spark_sink.py --cluster N: the same sinks, workload and checks on a Spark standalone
cluster (tests/harness/spark_cluster.py: a master and N workers of --executor-cores cores, an
executor JVM each with its own Python workers). The driver is bench/spark/cluster_run.py,
spark-submit'ed in client mode: it runs the warm-up and the timed rounds (spark_sink's own
functions) and prints the runs as one JSON line; this side builds the tables.

Each timed write is measured from /proc by the driver: CPU seconds of the executor JVMs, of
their Python workers (every process under them, reaped ones included), of the driver
(spark-submit's JVM and the Python processes under it), of the broker and of the Spark master
and workers, and the machine's busy CPU (/proc/stat): the rest of that is other load. Peak
RSS of the executors' Python workers: their sum and the largest one. Start-up: two save()s
of PROBE_ROWS rows per partition just before each timed write; the second's wall time, the
fixed cost of a write, as a share of the timed write's (the first may restart the Python
workers Spark stops after 60 s idle, which the kafka and noop runs leave them).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import spark_sink as sink
from _runs import Broker, broker_data_on_tmpfs
from tests.harness.spark_cluster import SparkStandaloneCluster

DRIVER = os.path.join(sink.HERE, "spark", "cluster_run.py")
PROBE_ROWS = 1000  # per partition
QUIET_LOAD = 1.5   # --wait-quiet: the 1-minute load average to wait for
GROUPS = ("executor_jvm", "executor_python", "driver", "broker", "daemons", "other")
GROUP_NAMES = {"executor_jvm": "executor JVMs", "executor_python": "executor Python workers",
               "driver": "driver (JVM + Python)", "broker": "broker",
               "daemons": "Spark master + workers", "other": "other (machine - these)"}


class ClusterView(SparkStandaloneCluster):
    """A running cluster seen from the driver through its directory (the harness has no way to
    attach to one): executor_pids() and executor_logs() work; nothing is started or stopped."""

    def __init__(self, directory, workers):  # noqa: super().__init__ would make a new dir
        self.dir, self.n_workers, self.procs = directory, workers, []
        self.master_url = self.webui = None

    def stop(self):
        raise RuntimeError("a ClusterView does not own its cluster")


def committed_count(bootstrap, topic, timeout=600.0):
    """The records a read_committed consumer (confluent-kafka) reads from ``topic`` to its end;
    fails if an open transaction holds the end back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException
    from confluent_kafka import TopicPartition

    from tests.harness.readback import assert_no_open_transaction
    assert_no_open_transaction(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-sink-count",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 64 * sink.MIB})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        count, done, deadline = 0, set(), time.monotonic() + timeout
        while len(done) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: {count} records read, partitions at their end: "
                                   f"{sorted(done)}")
            for m in c.consume(10_000, 1.0):
                if m.error() is None:
                    count += 1
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                else:
                    raise KafkaException(m.error())
        return count
    finally:
        c.close()


class CountingBroker(Broker):
    """A broker given by address, whose exactlyOnce topics are counted with read_committed."""

    def committed_count(self, topic):
        return committed_count(self.bootstrap, topic)


class ClusterMeter(sink.ProcMeter):
    """ProcMeter over the executors (of ``app_id``, all ``expected`` of them, the same ones
    from start to end), the driver, the broker and the Spark daemons."""

    def __init__(self, view, app_id, expected, driver_pid, broker_pid, daemon_pids,
                 every=0.5, timeout=180.0):
        deadline = time.monotonic() + timeout
        while len(view.executor_pids(app_id)) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{expected} executors wanted, live: "
                                   f"{view.executor_pids(app_id)}")
            time.sleep(0.5)
        self.executors = sorted(view.executor_pids(app_id))
        self.view, self.app_id = view, app_id
        super().__init__({"executors": self.executors, "driver": [driver_pid],
                          "broker": [broker_pid] if broker_pid else [],
                          "daemons": list(daemon_pids)}, every)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        alive = sorted(self.view.executor_pids(self.app_id))
        if alive != self.executors and exc[0] is None:
            raise RuntimeError(f"executors changed during the write: {self.executors} -> "
                               f"{alive}")

    def fields(self):
        c, p = self.cpu, self.peak["executors"]
        out = {"cpu_s": c["executors"]["own"] + c["executors"]["children"],
               "executor_jvm_cpu_s": c["executors"]["own"],
               "executor_python_cpu_s": c["executors"]["children"],
               "driver_cpu_s": c["driver"]["own"] + c["driver"]["children"],
               "broker_cpu_s": c["broker"]["own"] + c["broker"]["children"]
               if self.groups["broker"] else None,
               "daemons_cpu_s": c["daemons"]["own"],  # their children are the executors
               "machine_busy_s": self.machine_busy_s, "machine_all_s": self.machine_all_s,
               "peak_rss_mb": p["total"] / sink.MIB,
               "python_rss_sum_mb": p["children"] / sink.MIB,
               "python_rss_max_mb": p["child_max"] / sink.MIB, "executors": len(self.executors)}
        known = sum(out[f"{g}_cpu_s"] or 0 for g in GROUPS[:-1])
        out["other_cpu_s"] = self.machine_busy_s - known
        return out


# ---------------------------------------------------------------------------------------------
# tables

def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cluster_rows(runs, rows, cores):
    """spark_sink.summarize()'s rows (CPU: the executors', JVMs and Python workers) plus
    records/s per executor core, CPU s per M records of each process group, the machine's
    busy share, the Python workers' peak RSS and the start-up share; medians over rounds."""
    out = sink.summarize(runs, rows)
    for row in out:
        mine = [r for r in runs if r["client"] == row["client"]]
        row["workload"] = f"spark cluster {cores} executor cores, {rows / 1e6:g}M x " \
                          f"{sink.VALUE_SIZE}B"
        row["executor_cores"] = cores
        row["records_per_s_per_core"] = round(row["records_per_s"] / cores)
        for g in GROUPS:
            v = _med(r.get(f"{g}_cpu_s") for r in mine)
            row[f"{g}_cpu_s_per_m"] = None if v is None else round(v / (rows / 1e6), 2)
        busy = _med(r["machine_busy_s"] / r["machine_all_s"] for r in mine
                    if r.get("machine_all_s"))
        row["machine_busy_share"] = None if busy is None else round(busy, 3)
        for k in ("python_rss_sum_mb", "python_rss_max_mb"):
            row[k] = round(max(r[k] for r in mine))
        probe = _med(r.get("probe_wall_s") for r in mine)
        first = _med(r.get("probe_first_wall_s") for r in mine)
        row["probe_wall_s"] = None if probe is None else round(probe, 3)
        row["probe_first_wall_s"] = None if first is None else round(first, 3)
        row["startup_share"] = None if probe is None else round(
            probe / _med(r["wall_s"] for r in mine), 4)
    return out


def _x(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v)


def goals(meta):
    """The issue's two goals, each with its measured value and whether it is met."""
    out = []
    if meta.get("ratio") is not None:
        out.append(("format(\"pyprod\") / format(\"kafka\") records/s per executor core",
                    meta["ratio"], 2.0))
    if meta.get("eos_ratio") is not None:
        out.append(("exactlyOnce / at-least-once format(\"pyprod\") records/s",
                    meta["eos_ratio"], 0.9))
    return [{"goal": g, "value": round(v, 3), "target": t, "met": v >= t} for g, v, t in out]


def cluster_markdown(meta, rows):
    lines = sink.header(meta, "Spark sinks on a standalone cluster") + [
        f"Workload: {meta['workload']}. Medians of {meta['rounds']} interleaved rounds after "
        "one untimed warm-up run of each sink. CPU per record: the executor JVMs and every "
        "Python process under them, over the timed save(); the driver and the rest apart.", "",
        "| sink | records/s | records/s per executor core | executors' CPU s / M records | "
        "driver CPU s / M records | Python workers' peak RSS MiB (sum / max) | start-up share "
        "| rounds (records/s) |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['client']} | {r['records_per_s']:,} | {r['records_per_s_per_core']:,} | "
            f"{r['cpu_s_per_m']} | {_x(r['driver_cpu_s_per_m'])} | {r['python_rss_sum_mb']} / "
            f"{r['python_rss_max_mb']} | {_x(r['startup_share'], '{:.1%}')} | "
            f"{', '.join(f'{x:,}' for x in r['rounds_records_per_s'])} |")
    lines += ["", "Where the CPU goes (CPU s / M records, medians; the machine has "
              f"{meta['machine']['cores']} cores for all of it):", "",
              "| sink | " + " | ".join(GROUP_NAMES[g] for g in GROUPS)
              + " | machine busy |", "|---|" + "---:|" * (len(GROUPS) + 1)]
    for r in rows:
        lines.append(f"| {r['client']} | " + " | ".join(_x(r[f"{g}_cpu_s_per_m"])
                                                        for g in GROUPS)
                     + f" | {_x(r['machine_busy_share'], '{:.0%}')} |")
    for g in goals(meta):
        lines += ["", f"**{g['goal']} = {g['value']:.2f}x** (goal >= {g['target']}x: "
                  f"{'met' if g['met'] else 'missed'})."]
    if meta.get("cpu_ratio") is not None:
        lines += ["", f"Executors' CPU per record, format(\"pyprod\") / format(\"kafka\"): "
                  f"{meta['cpu_ratio']:.2f}x."]
    if meta.get("eos_cpu_ratio") is not None:
        lines += ["", f"Executors' CPU per record, exactlyOnce / at-least-once: "
                  f"{meta['eos_cpu_ratio']:.2f}x"
                  + (f"; exactlyOnce / format(\"kafka\") records/s: {meta['eos_jvm_ratio']:.2f}x."
                     if meta.get("eos_jvm_ratio") is not None else ".")]
    if meta.get("notes"):
        lines += [""] + [f"- {n}" for n in meta["notes"]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the parent: broker, cluster, spark-submit

def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_quiet(minutes):
    """Poll the 1-minute load every 60 s until it is below QUIET_LOAD, for up to ``minutes``;
    (load when done, waited s)."""
    t0 = time.monotonic()
    while load1() >= QUIET_LOAD and time.monotonic() - t0 < minutes * 60:
        print(f"[bench] load {load1()}: waiting for < {QUIET_LOAD}", file=sys.stderr,
              flush=True)
        time.sleep(60)
    return load1(), round(time.monotonic() - t0)


def _follow(app, timeout):
    """The driver's result, its [bench] lines echoed meanwhile."""
    seen, deadline = 0, time.monotonic() + timeout
    while app.proc.poll() is None and time.monotonic() < deadline:
        lines = [ln for ln in app.stdout().splitlines() if ln.startswith("[bench]")]
        for ln in lines[seen:]:
            print(ln, file=sys.stderr, flush=True)
        seen = len(lines)
        time.sleep(2)
    return app.wait(timeout=max(1, deadline - time.monotonic()))


def run_cluster(args, argv):
    jars, connector = sink.connector_jars()
    waited = wait_quiet(args.wait_quiet) if args.wait_quiet else (load1(), 0)
    cores = args.cluster * args.executor_cores
    parts = args.spark_partitions or cores
    if args.broker_data == "tmpfs" and not args.bootstrap_servers:
        broker_data_on_tmpfs()
    with Broker(args.bootstrap_servers) as broker:
        # KafkaCluster names no pid: its process handle's (the broker's own CPU, per window)
        broker_pid = broker.cluster._procs[0].pid if broker.cluster else None
        cluster = SparkStandaloneCluster(workers=args.cluster, cores=args.executor_cores,
                                         memory=args.worker_memory,
                                         executor_memory=args.executor_memory)
        try:
            cluster.start()
            cfg = {"bootstrap": broker.bootstrap, "rows": args.rows, "rounds": args.rounds,
                   "warmup_rows": args.warmup_rows, "clients": args.client_list,
                   "kafka_options": args.kafka_options, "parts": parts, "probe": PROBE_ROWS
                   * parts, "cluster_dir": cluster.dir, "workers": args.cluster,
                   "broker_pid": broker_pid, "daemon_pids": [p.pid for _, p in cluster.procs]}
            conf = {"spark.jars": ",".join(jars)}
            if args.arrow_batch:
                conf["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(args.arrow_batch)
            app = cluster.submit(DRIVER, json.dumps(cfg), conf=conf)
            runs_left = args.rounds * len(args.client_list) * 3 + len(args.client_list)
            result = _follow(app, 900 + runs_left * (30 + args.rows / 40_000))
        finally:
            cluster.stop()
    load_after = load1()
    rows = cluster_rows(result["runs"], args.rows, cores)
    meta = sink.meta_info(
        args, argv, connector, parts,
        f"Spark standalone: a master and {args.cluster} workers of {args.executor_cores} "
        f"core(s) and {args.worker_memory} each, one executor JVM per worker (heap "
        f"{args.executor_memory}), Python worker reuse on; the driver spark-submit'ed in "
        f"client mode (512m); {parts} DataFrame partitions")
    meta.update(sink.ratios(rows), app_id=result["app_id"], executor_cores=cores,
                load1_before=waited[0], quiet_wait_s=waited[1], load1_after=load_after,
                driver_root_is_jvm=result["driver_root_is_jvm"])
    meta["goals"] = goals(meta)
    runs = result["runs"]
    meta["other_share"] = round(sum(r["other_cpu_s"] for r in runs)
                                / sum(r["machine_all_s"] for r in runs), 3)
    meta["notes"][-1:-1] = [
        f"The 1-minute load average was {waited[0]} when the run started"
        + (f" (after waiting {waited[1]} s for < {QUIET_LOAD})" if waited[1] else "")
        + f" and {load_after} when it ended (our own run included); processes not ours took "
        f"{meta['other_share']:.0%} of the machine's CPU over the timed writes (the table's "
        "\"other\"; about 0 on a quiet machine).",
        "Start-up share: the wall time of the same save() of "
        f"{PROBE_ROWS:,} rows per partition, run twice just before each timed write, the "
        "second (planning, scheduling, the tasks' start, flush and, for exactlyOnce, "
        "InitProducerId and the commit), over the timed write's. The first can be slower: "
        "Spark stops Python workers idle for 60 s (the kafka and noop runs leave them idle), "
        "and a new one imports pyspark, pyarrow and pyprod and makes its producer (medians, "
        "first / second: " + ", ".join(
            f"{r['client']} {_x(r['probe_first_wall_s'])} / {_x(r['probe_wall_s'])} s"
            for r in rows) + ").",
        "CPU from /proc over each timed save(), measured by the driver (its own sampling "
        "every 0.5 s included in the driver's figure). The executors' Python workers stay "
        "up between runs (worker reuse): format(\"kafka\") runs none, so its Python RSS is "
        "that of idle workers left by the format(\"pyprod\") runs.",
        "exactlyOnce topics are also read to their end by a read_committed consumer "
        "(confluent-kafka): exactly the rows, no transaction left open."]
    sink.write_results(args, rows, meta, result["runs"], cluster_markdown(meta, rows))
    return 0
