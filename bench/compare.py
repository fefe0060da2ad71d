"""Every producer on the same broker, in one run: pyprod, kafka-python, confluent-kafka,
aiokafka and the Java producer (kafka-tools' ProducerPerformance), in steady state.

For each workload (6 partitions; acks=1, linger_ms=5 and each client's default batch size
unless the workload says otherwise; one value of random upper-case letters, as Java's tool
uses) every client runs in its own subprocess, interleaved, >= 3 rounds with the order
rotated. A throughput run times the first send() until flush() returns; a separate paced run
offers 50,000 records/s and measures send()->callback latency (not for 100B-callbacks, whose
throughput run already has a callback on every record). Steady state: a run sends at least 20
times what the client's default buffer holds (10M records of 100 B by default), so the buffer
absorbs under 5% of it. The broker: Apache Kafka started here (one node, its data on a tmpfs,
each run's topic deleted), librdkafka's mock cluster (--broker mock: the client's own cost), or
--bootstrap-servers. Per client and workload: median records/s and MB/s (2**20 bytes of
values), CPU s per million records (the child's own getrusage over the timed window; Java: the
whole JVM from wait4), the broker's CPU, peak RSS (the child's ru_maxrss), the buffer's share
of the run and the median p50/p99 latency of the paced runs.

    python bench/compare.py                       # every workload, 3 rounds (over an hour on 2 cores)
    python bench/compare.py --quick               # smoke run: 100k records, 2 workloads
    python bench/compare.py --broker mock --workloads 100B,lz4 --slow-workloads 100B --rounds 5

Writes bench/results/NAME.json, NAME.md and NAME.png (--name, default compare); rows of
bench/results/spark_sink.json (bench/spark_sink.py), if present, are merged in.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
try:
    import pyprod  # noqa: F401
except ImportError:  # a source checkout without an install
    sys.path.insert(0, os.path.join(REPO, "src"))
if REPO not in sys.path:  # tests.harness (read-back, the secured broker)
    sys.path.insert(1, REPO)

# the pieces, re-exported: the other bench scripts and tests/test_bench_tools.py use compare.X
from _clients import _cpu, _run_aiokafka, _split, _value, child_main  # noqa: E402,F401
from _runs import Broker, broker_data_on_tmpfs, run_measured, run_one, run_python_client  # noqa: E402,F401
from _tables import (machine_info, markdown, merge_spark, other_cores, save_chart,  # noqa: E402,F401
                     summarize, versions, write_results, _num, _order)
import _mock_broker  # noqa: E402
from _workloads import (ALIASES, CLIENT_SHARE, CLIENTS, DESCRIBE, KEYS, LATENCY_RATE,  # noqa: E402,F401
                        KEY_SIZE, LINGER_MS, MOCK_SKIP, PARTITIONS, QUICK_WORKLOADS, SKIP, WORKLOADS,
                        buffered_records, records_for_steady_state, workload_spec)

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
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka",
                    help="Apache Kafka, 1 node, data on a tmpfs (default); or librdkafka's "
                         "mock cluster, where the client's own cost is the bound")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--workloads", default=None,
                    help="comma-separated subset of " + ",".join(WORKLOADS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=None,
                    help="records per throughput run (default 10,000,000; --quick 100,000); "
                         "never fewer than steady state needs unless --no-steady")
    ap.add_argument("--no-steady", dest="steady", action="store_false",
                    help="let the client's buffer hold more than 5%% of a run (--quick implies)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: 100k records, workloads {','.join(QUICK_WORKLOADS)}, "
                         "1 s paced runs")
    ap.add_argument("--slow-workloads", default=None,
                    help="kafka-python and aiokafka run only these workloads (in steady state "
                         "each of their runs takes minutes; default: all)")
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
    n = args.records or (100_000 if args.quick else 10_000_000)
    steady = args.steady and not args.quick
    slow = set(workloads if not args.slow_workloads else args.slow_workloads.split(","))
    secs = args.latency_seconds or (1.0 if args.quick else 5.0)
    specs, skipped = [], {}
    for w in workloads:
        for c in clients:
            why = SKIP.get((c, w)) or (MOCK_SKIP.get(c) if args.broker == "mock" else None)
            if not why and c in CLIENT_SHARE and w not in slow:
                why = "not in --slow-workloads (a steady-state run takes minutes)"
            if why:
                skipped[f"{c} / {w}"] = why
                continue
            base = dict(workload_spec(w, args.batch_size), client=c)
            count = max(1, int(n * CLIENT_SHARE.get(c, 1) * WORKLOADS[w].get("share", 1)))
            sizes = (base["value_size"], KEY_SIZE if base["keyed"] else 0)
            if steady:
                count = max(count, records_for_steady_state(*sizes, client=c))
            specs.append(dict(base, records=count, rate=None,
                              buffer_share=buffered_records(c, *sizes) / count))
            # paced runs have callbacks anyway; and send outside a transaction
            if args.latency and not base["callbacks"] and not base["transaction_size"]:
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
    mock = args.broker == "mock"
    if mock and (secured or args.bootstrap_servers):
        ap.error("--broker mock starts its own mock cluster, with no secured listener")
    if not args.bootstrap_servers and not mock:
        broker_data_on_tmpfs()
    with (_mock_broker.MockBroker() if mock else Broker(args.bootstrap_servers, secured)) \
            as broker:
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
                                    if "broker_cpu_s" in res else "") + (
                                    f", others {max(0.0, res['other_cpu_s']) / res['run_s']:.2f}"
                                    " cores" if "run_s" in res else ""))
                        print(f"round {rnd + 1}/{args.rounds} {w:>20} {spec['client']:>15}: "
                              f"{what}", file=sys.stderr, flush=True)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": command or " ".join(["python bench/compare.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": machine_info(), "versions": versions(clients), "rounds": args.rounds,
            "records": n, "workloads": {w: DESCRIBE[w] for w in workloads},
            "latency_rate": LATENCY_RATE if args.latency else None, "skipped": skipped,
            "elapsed_s": round(time.monotonic() - t_start, 1),
            "load_average": os.getloadavg(), "other_cores": other_cores(runs),
            "steady": args.steady and not args.quick,
            "broker": _mock_broker.LABEL if mock else (
                "Apache Kafka, 1 node, data on a tmpfs" if not args.bootstrap_servers
                else f"Apache Kafka at {args.bootstrap_servers}")}
    if mock:
        meta["versions"]["mock broker"] = _mock_broker.version()
    rows = summarize(runs)
    if args.spark:
        rows = merge_spark(rows, meta, args.spark)
    paths = write_results(meta, runs, rows, args.out_dir, args.name, args.chart)
    print(markdown(meta, rows))
    print("wrote " + ", ".join(paths.values()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
