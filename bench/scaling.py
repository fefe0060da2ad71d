"""Memory and scaling of pyprod, with confluent-kafka beside it as the reference.

1. Memory: one child sends 5M 100-byte records at full rate (keyless, acks=1, linger_ms=5,
   6 partitions). Its RSS is read from /proc every 50 ms and its peak is the child's ru_maxrss;
   pyprod's peak is held against buffer_memory + 64 MiB (the BufferPool bounds the queued
   data; the 64 MiB is for the interpreter, the modules and in-flight requests).
2. Partitions: records/s and CPU per record at 1, 6 and 24 partitions (one caller thread).
3. Caller threads: 1, 2 and 4 threads sharing one producer, 6 partitions.

Runs use compare.py's children and broker, interleaved, >= 3 rounds with the order rotated.

    python bench/scaling.py            # 5M-record memory run + 1M-record scaling runs, 3 rounds
    python bench/scaling.py --quick    # 1M-record memory run, 200k-record runs
    python bench/scaling.py --broker mock   # the same on librdkafka's mock broker

Writes bench/results/scaling.json, scaling.md and scaling.png (--broker mock: scaling_mock.*).
On Apache Kafka a 2-core machine's broker takes most of the CPU and bounds the clients; the mock
stores batches without decoding them, so there the client is the bottleneck.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402
import _mock_broker  # noqa: E402

MIB = 1024 * 1024
HEADROOM_MIB = 64
PARTITION_COUNTS = (1, 6, 24)
THREAD_COUNTS = (1, 2, 4)
CLIENTS = ("pyprod", "confluent-kafka")
DEFAULT_BUFFER_MEMORY = 32 * MIB  # pyprod's default buffer_memory


def scale_name(partitions: int, threads: int) -> str:
    return f"{partitions}p-{threads}t"


def plan(records: int, clients) -> list:
    """The scaling runs of one round: (partitions, 1 thread) and (6 partitions, threads)."""
    shapes = [(p, 1) for p in PARTITION_COUNTS] + [(6, t) for t in THREAD_COUNTS if t != 1]
    return [dict(compare.workload_spec("100B"), client=c, workload=scale_name(p, t),
                 partitions=p, threads=t, records=records, rate=None)
            for p, t in shapes for c in clients]


def memory_verdict(peak_mb: float, buffer_memory: int) -> dict:
    bound = buffer_memory / MIB + HEADROOM_MIB
    return {"peak_rss_mb": peak_mb, "bound_mb": bound, "held": peak_mb <= bound,
            "buffer_memory_mb": buffer_memory / MIB}


def _ratio(rows, client, shape, base, key):
    a = rows.get((client, shape), {}).get(key)
    b = rows.get((client, base), {}).get(key)
    return a / b if a and b else None


def growth_sentences(rows_by_key: dict, clients) -> list:
    """How records/s and CPU per record move from the first shape to the others."""
    out = []
    for label, shapes, base in (("partitions", [scale_name(p, 1) for p in PARTITION_COUNTS],
                                 scale_name(1, 1)),
                                ("caller threads", [scale_name(6, t) for t in THREAD_COUNTS],
                                 scale_name(6, 1))):
        for c in clients:
            parts = []
            for s in shapes[1:]:
                r = _ratio(rows_by_key, c, s, base, "records_per_s")
                cpu = _ratio(rows_by_key, c, s, base, "cpu_s_per_m")
                if r is not None and cpu is not None:
                    parts.append(f"{s}: {r:.2f}x the records/s, {cpu:.2f}x the CPU per record")
            if parts:
                out.append(f"{c}, {label} (against {base}): " + "; ".join(parts) + ".")
    return out


def markdown(meta, memory, rows) -> str:
    m = meta["machine"]
    on = f" on the {meta['broker']}" if meta.get("broker") else ""
    lines = [f"# Memory and scaling{on}, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, Python {m['python']}. Versions: "
             + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "", "## Peak memory at full rate", "",
             "| client | records | records/s | peak RSS MB | bound MB | held |",
             "|---|---:|---:|---:|---:|---|"]
    for r in memory:
        v = r.get("verdict")
        lines.append(f"| {r['client']} | {r['records']:,} | {r['records'] / r['wall_s']:,.0f} | "
                     f"{r['peak_rss_mb']:.0f} | "
                     + (f"{v['bound_mb']:.0f} | {'yes' if v['held'] else '**no**'} |"
                        if v else "— | — |"))
    if memory and memory[0].get("verdict"):
        v = memory[0]["verdict"]
        lines += ["", f"pyprod's bound is buffer_memory ({v['buffer_memory_mb']:.0f} MiB) + "
                  f"{HEADROOM_MIB} MiB. confluent-kafka (librdkafka) queues up to "
                  "queue.buffering.max.kbytes (1 GiB by default): it has no such bound."]
    lines += ["", "## Partitions and caller threads", "",
              f"Medians of {meta['rounds']} interleaved rounds of {meta['records']:,} records "
              "(100-byte values, keyless, acks=1, linger_ms=5). Ratios are to the same "
              "client's first shape in the same run.", "",
              "| shape | client | records/s (min..max) | ratio | CPU s / M records | ratio |",
              "|---|---|---:|---:|---:|---:|"]
    by_key = {(r["client"], r["workload"]): r for r in rows}
    for r in rows:
        base = scale_name(1, 1) if r["workload"].endswith("-1t") else scale_name(6, 1)
        rr = _ratio(by_key, r["client"], r["workload"], base, "records_per_s")
        cr = _ratio(by_key, r["client"], r["workload"], base, "cpu_s_per_m")
        lines.append(f"| {r['workload']} | {r['client']} | {r['records_per_s']:,.0f} "
                     f"({r['min_records_per_s']:,.0f}..{r['max_records_per_s']:,.0f}) | "
                     f"{compare._num(rr, '.2f')}x | {r['cpu_s_per_m']:.2f} | "
                     f"{compare._num(cr, '.2f')}x |")
    lines += [""] + growth_sentences(by_key, meta["clients"])
    return "\n".join(lines) + "\n"


def chart(meta, memory, rows, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1, ax2) = plt.subplots(3, 1, figsize=(9, 11))
    colors = plt.get_cmap("tab10")
    for i, r in enumerate(memory):
        if r.get("rss_timeline"):
            t, rss = zip(*r["rss_timeline"])
            ax0.plot(t, rss, label=f"{r['client']} (peak {r['peak_rss_mb']:.0f} MB)",
                     color=colors(i))
        if r.get("verdict"):
            ax0.axhline(r["verdict"]["bound_mb"], color=colors(i), ls="--", lw=1,
                        label=f"{r['client']} bound: buffer_memory + {HEADROOM_MIB} MiB")
    ax0.set_xlabel("seconds since the child started")
    ax0.set_ylabel("RSS MB")
    ax0.set_title(f"RSS while sending {memory[0]['records']:,} records at full rate"
                  if memory else "RSS", fontsize=10)
    ax0.legend(fontsize=8)
    clients = meta["clients"]
    for ax, shapes, title in (
            (ax1, [scale_name(p, 1) for p in PARTITION_COUNTS], "partitions (1 caller thread)"),
            (ax2, [scale_name(6, t) for t in THREAD_COUNTS], "caller threads (6 partitions)")):
        width = 0.8 / len(clients)
        for ci, c in enumerate(clients):
            ys = [next((r["records_per_s"] for r in rows
                        if r["client"] == c and r["workload"] == s), 0) for s in shapes]
            ax.bar([i + (ci - (len(clients) - 1) / 2) * width for i in range(len(shapes))], ys,
                   width, label=c, color=colors(ci))
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(shapes)
        ax.set_ylabel("records/s")
        ax.set_title(f"Throughput by {title}", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    title = "pyprod memory and scaling" + (f" ({meta['broker']})" if meta.get("broker") else "")
    compare.save_chart(fig, meta, title, path, rect=(0, 0.03, 1, 0.97))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka",
                    help="Apache Kafka (default) or librdkafka's mock cluster")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=None,
                    help="records per scaling run (default 1,000,000; --quick 200,000)")
    ap.add_argument("--memory-records", type=int, default=None,
                    help="records of the memory run (default 5,000,000; --quick 1,000,000)")
    ap.add_argument("--buffer-memory", type=int, default=DEFAULT_BUFFER_MEMORY,
                    help="pyprod's buffer_memory in bytes for the memory run")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", help="result file names (default scaling; --broker mock: "
                    "scaling_mock)")
    args = ap.parse_args(argv)
    for opt in ("rounds", "records", "memory_records", "buffer_memory"):
        v = getattr(args, opt)
        if v is not None and v <= 0:
            ap.error(f"--{opt.replace('_', '-')} must be positive")
    if args.broker == "mock" and args.bootstrap_servers:
        ap.error("--bootstrap-servers is for --broker kafka")
    clients = compare._names(ap, args.clients, CLIENTS, "client", compare.ALIASES)
    records = args.records or (200_000 if args.quick else 1_000_000)
    mem_records = args.memory_records or (1_000_000 if args.quick else 5_000_000)

    memory, runs = [], []
    mock = args.broker == "mock"
    with (_mock_broker.MockBroker() if mock else compare.Broker(args.bootstrap_servers)) as broker:
        compare.warm_broker(broker, clients, ["100B"], min(records, 300_000))
        if not args.skip_memory:
            for c in clients:
                spec = dict(compare.workload_spec("100B"), client=c, workload="memory",
                            records=mem_records, rate=None)
                if c == "pyprod":
                    spec["buffer_memory"] = args.buffer_memory
                res = compare.run_one(broker, spec, rss_every=0.05)
                if c == "pyprod":
                    res["verdict"] = memory_verdict(res["peak_rss_mb"], args.buffer_memory)
                memory.append(res)
                print(f"memory {c}: peak RSS {res['peak_rss_mb']:.0f} MB over "
                      f"{mem_records:,} records", file=sys.stderr, flush=True)
        if not args.skip_scaling:
            specs = plan(records, clients)
            for rnd in range(args.rounds):
                for spec in compare._rotate(specs, rnd * len(clients)):
                    res = compare.run_one(broker, spec)
                    res["round"] = rnd
                    runs.append(res)
                    print(f"round {rnd + 1}/{args.rounds} {spec['workload']:>6} "
                          f"{spec['client']:>15}: {res['records'] / res['wall_s']:,.0f} "
                          f"records/s, {res['cpu_s'] / res['records'] * 1e6:.2f} CPU s/M",
                          file=sys.stderr, flush=True)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/scaling.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": compare.versions(clients),
            "clients": clients, "rounds": args.rounds, "records": records,
            "memory_records": mem_records, "load_average": os.getloadavg()}
    if mock:
        meta["broker"] = _mock_broker.LABEL
        del meta["versions"]["kafka_broker"]
        meta["versions"]["mock broker"] = _mock_broker.version()
    order = [scale_name(p, 1) for p in PARTITION_COUNTS] + \
        [scale_name(6, t) for t in THREAD_COUNTS if t != 1]
    rows = sorted(compare.summarize(runs), key=lambda r: (
        order.index(r["workload"]) if r["workload"] in order else len(order),
        compare._order(r["client"], CLIENTS)))
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, args.name or ("scaling_mock" if mock else "scaling"))
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "memory": memory, "rows": rows, "runs": runs}, f, indent=2)
        f.write("\n")
    text = markdown(meta, memory, rows)
    with open(base + ".md", "w") as f:
        f.write(text)
    chart(meta, memory, rows, base + ".png")
    print(text)
    print(f"wrote {base}.json, .md, .png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
