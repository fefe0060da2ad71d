"""compare.py's results: summary rows, Markdown, JSON and the chart, labelled with the machine
and every client's version."""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import textwrap

from _workloads import (CLIENT_SHARE, CLIENTS, LATENCY_RATE, LINGER_MS, PARTITIONS, WORKLOADS)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MB = 1024 * 1024

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
    from pyprod.local_broker.jars import DEFAULT_KAFKA_VERSION

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
               "peak_rss_mb": None, "p50_ms": None, "p99_ms": None, "buffer_share": None}
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
                       peak_rss_mb=max(r["peak_rss_mb"] for r in thr),
                       buffer_share=max((r.get("buffer_share") for r in thr
                                         if r.get("buffer_share") is not None), default=None))
        if lat:
            achieved = statistics.median(r["records"] / r.get("send_s", r["wall_s"])
                                         for r in lat)
            row.update(p50_ms=statistics.median(r["p50_ms"] for r in lat)
                       if all("p50_ms" in r for r in lat) else None,
                       p99_ms=statistics.median(r["p99_ms"] for r in lat),
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


def _others(meta: dict) -> str:
    """What other processes took while the runs ran: figures from a loaded machine do not
    carry over to a quiet one (a busy neighbour on the other hyperthread slows every client,
    and the multi-threaded ones most)."""
    o = meta.get("other_cores")
    if not o:
        return "Other processes' load during the runs: not measured."
    return (f"Other processes used {o['median']:.2f} cores during the median run (at most "
            f"{o['max']:.2f}); hypervisor steal {o['steal_s']:.1f} s in all.")


def other_cores(runs: list) -> dict | None:
    """meta's other_cores: cores other processes used during each timed run (median, max)."""
    used = [max(0.0, r["other_cpu_s"]) / r["run_s"] for r in runs if "run_s" in r]
    if not used:
        return None
    return {"median": round(statistics.median(used), 3), "max": round(max(used), 3),
            "steal_s": round(sum(r.get("steal_s", 0) for r in runs), 1)}


def markdown(meta: dict, rows: list) -> str:
    m = meta["machine"]
    lines = [f"# Producer comparison, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python {m['python']}.",
             "Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "",
             f"Broker: {meta.get('broker', 'Apache Kafka, 1 node')}, on the same machine. "
             f"{PARTITIONS} partitions, acks=1, "
             f"linger_ms={LINGER_MS}, each client's default batch size unless the workload says "
             f"otherwise. Medians of {meta['rounds']} interleaved rounds, each run in its own "
             "process. p50/p99: send()->callback latency at an offered "
             f"{LATENCY_RATE:,} records/s (a separate paced run). MB = 2^20 bytes of values. "
             "Buffer: the most records the client's default buffer holds, as a share of the "
             "run (steady state: under 5%).", "", _others(meta),
             "", "| workload | client | records | buffer | records/s (min..max) | MB/s "
             "| CPU s / M records | broker CPU s / M | peak RSS MB | p50 / p99 ms @ 50k/s "
             "| pyprod / client: records/s, CPU per record |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    same_run = {(r["client"], r["workload"]): r for r in rows if not r.get("source")}
    for r in rows:
        rate = _num(r.get("records_per_s"), ",.0f")
        if r.get("min_records_per_s") is not None:
            rate += f" ({r['min_records_per_s']:,.0f}..{r['max_records_per_s']:,.0f})"
        cpu = _num(r.get("cpu_s_per_m"), ".2f") + (" \\*" if r.get("cpu_is_whole_jvm") else "")
        p99 = _num(r.get("p50_ms"), ".1f") + " / " + _num(r.get("p99_ms"), ".1f")
        if r.get("latency_saturated"):
            p99 += f" † ({r['latency_achieved_per_s']:,.0f}/s)"
        ratio = "—"
        mine = same_run.get(("pyprod", r["workload"]))
        if (mine and r["client"] != "pyprod" and not r.get("source")
                and mine.get("records_per_s") and r.get("records_per_s")):
            ratio = f"{mine['records_per_s'] / r['records_per_s']:.2f}x"
            if mine.get("cpu_s_per_m") and r.get("cpu_s_per_m") and not r.get("cpu_is_whole_jvm"):
                ratio += f", {mine['cpu_s_per_m'] / r['cpu_s_per_m']:.2f}x"
        records = _num(r.get("records"), ",")
        share = "—" if r.get("buffer_share") is None else f"{r['buffer_share']:.1%}"
        lines.append(f"| {r['workload']} | {_label(r)} | {records} | {share} | {rate} | "
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
                 "that for the slower clients; 1KiB workloads a quarter"
                 + ("; in steady state never fewer than 20 times what the client's buffer "
                    "holds." if meta.get("steady") else "."))
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
    save_chart(fig, meta, "Kafka producers, " + meta.get("broker", "one broker"), path,
               rect=(0, 0.04, 1, 0.94))


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
