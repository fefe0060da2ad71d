"""send_batch from three column kinds: numpy ``S100`` arrays, pyarrow binary arrays and Python
lists of bytes, on one Kafka broker or librdkafka's mock cluster: records/s and records per CPU
second of the producing process ("per core").

10M keyless 100-byte values by default (no NUL byte in them, so numpy's S semantics keep all
100), sent ``--chunk`` rows per send_batch call (100k by default) from one prebuilt chunk,
6 partitions, acks=1, linger_ms=5. Each run is its own process: it builds its chunk (not
timed), warms every partition, then times the send_batch calls and the flush, with CPU from
getrusage (every thread of the process, the Sender's too). Sources are interleaved, their order
rotated each round, after one untimed warm-up run (a cold broker slows whichever source goes
first); medians over rounds, with min..max. Every run's landed count is checked
(end offsets); on Kafka (one node, its data on /dev/shm) each run's topic is deleted after.

    python bench/send_batch_columns.py                                  # Kafka, 3 rounds
    python bench/send_batch_columns.py --broker mock
    python bench/send_batch_columns.py --rows 200000 --rounds 1 --broker mock   # a smoke run
    python bench/send_batch_columns.py --broker mock --before 52dd66b --after 1234abc

With --before (and --after, else the working tree), each source runs in both trees' kcore
(before_after.build_tree: a worktree built in place), the trees adjacent in every round, and
the table gives each tree's figures and the after/before ratio of CPU per record (the median
over rounds of the two adjacent runs' ratio).

Writes bench/results/send_batch_columns_{kafka,mock}.json and .md (and prints the table).
Needs numpy and pyarrow; --broker mock needs confluent-kafka.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import sys
import time
import uuid

import before_after
import compare
from _runs import run_child

SOURCES = ("numpy", "arrow", "list")
ROWS = 10_000_000
CHUNK = 100_000
VALUE_SIZE = 100
WARM_ROWS = 1_000_000  # the untimed warm-up run's


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def make_column(source: str, chunk: int, value_size: int):
    """One chunk of values as the source's column: distinct bytes, none of them NUL."""
    import numpy as np
    raw = np.random.default_rng(1).integers(1, 256, size=(chunk, value_size), dtype=np.uint8)
    col = raw.view("S%d" % value_size).ravel()
    if source == "numpy":
        return col
    if source == "arrow":
        import pyarrow as pa
        offsets = np.arange(0, (chunk + 1) * value_size, value_size, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), chunk,
                                     [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
    return col.tolist()


def child(spec: dict) -> dict:
    from pyprod import KafkaProducer
    col = make_column(spec["source"], spec["chunk"], spec["value_size"])
    calls = [spec["chunk"]] * (spec["rows"] // spec["chunk"])
    tail = spec["rows"] % spec["chunk"]
    tail_col = col[:tail] if tail else None
    p = KafkaProducer(bootstrap_servers=spec["bootstrap"], acks=1,
                      linger_ms=compare.LINGER_MS, **spec["extra"])
    for f in [p.send(spec["topic"], b"warm", partition=i) for i in range(compare.PARTITIONS)]:
        f.get(30)  # metadata, the connection, every partition's leader answering
    futures, topic, send_batch = [], spec["topic"], p.send_batch
    c0, t0 = _cpu(), time.perf_counter()
    for _ in calls:
        futures.append(send_batch(topic, col))
    if tail_col is not None:
        futures.append(send_batch(topic, tail_col))
    p.flush()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    sent = sum(f.get(0).record_count for f in futures)
    p.close()
    return {"source": spec["source"], "records": sent, "wall_s": wall, "cpu_s": cpu}


# ---------------------------------------------------------------------------------------------
# the parent

def run_one(broker, spec: dict, src: str | None = None) -> dict:
    """One run; its child imports pyprod from src (a tree's src directory) if given."""
    topic = f"sbc-{spec['source']}-{spec['round']}-{uuid.uuid4().hex[:8]}"
    broker.create(topic, compare.PARTITIONS)
    bootstrap, extra = broker.client_address({"client": "pyprod"})
    args = dict(spec, topic=topic, bootstrap=bootstrap, extra=extra or {})
    old = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    try:
        res = dict(run_child(os.path.abspath(__file__), args, spec["source"], spec["rows"]),
                   round=spec["round"], tree=spec.get("tree", ""))
        landed = broker.count(topic)
    finally:
        if src and old is None:
            del os.environ["PYTHONPATH"]
        elif src:
            os.environ["PYTHONPATH"] = old
        broker.delete(topic)
    if res["records"] != spec["rows"] or landed != spec["rows"] + compare.PARTITIONS:
        raise RuntimeError(f"{spec['source']}: {landed} records in {topic} "
                           f"({res['records']} acknowledged), expected "
                           f"{spec['rows'] + compare.PARTITIONS}")
    return res


def _cpu_ratio(runs: list, source: str) -> float | None:
    """Median over rounds of after/before CPU per record (the two runs of a round adjacent)."""
    ratios = []
    for rnd in dict.fromkeys(r["round"] for r in runs):
        pair = {r["tree"]: r["cpu_s"] / r["records"] for r in runs
                if r["round"] == rnd and r["source"] == source}
        if len(pair) == 2:
            ratios.append(pair["after"] / pair["before"])
    return statistics.median(ratios) if ratios else None


def summarize(runs: list) -> list:
    rows = []
    for tree, source in dict.fromkeys((r["tree"], r["source"]) for r in runs):
        mine = [r for r in runs if r["source"] == source and r["tree"] == tree]
        rate = [r["records"] / r["wall_s"] for r in mine]
        per_core = [r["records"] / r["cpu_s"] for r in mine if r["cpu_s"] > 0]
        rows.append({"tree": tree, "source": source, "runs": len(mine),
                     "cpu_ratio": _cpu_ratio(runs, source) if tree == "after" else None,
                     "records_per_s": statistics.median(rate),
                     "records_per_s_min": min(rate), "records_per_s_max": max(rate),
                     "records_per_cpu_s": statistics.median(per_core) if per_core else None,
                     "records_per_cpu_s_min": min(per_core, default=None),
                     "records_per_cpu_s_max": max(per_core, default=None)})
    return rows


LABELS = {"numpy": "numpy S%d array", "arrow": "pyarrow binary array",
          "list": "Python list of bytes"}


def markdown(meta: dict, rows: list) -> str:
    first = rows[0] if rows else None
    out = [f"# send_batch from numpy, Arrow and list columns ({meta['broker_label']})", "",
           f"{meta['rows']:,} keyless {meta['value_size']}-byte values per run, "
           f"{meta['chunk']:,} rows per send_batch call, {compare.PARTITIONS} partitions, "
           f"acks=1, linger_ms={compare.LINGER_MS}; medians of {meta['rounds']} interleaved "
           "rounds (min..max). Per core: records per CPU second of the producing process "
           "(every thread).", "",
           "| column | records/s | per core (records/CPU s) | vs " +
           (first["source"] if first else "") + " (records/s) | CPU/record after/before |",
           "|---|---:|---:|---:|---:|"]
    for r in rows:
        per_core = "n/a" if r["records_per_cpu_s"] is None else \
            f"{r['records_per_cpu_s']:,.0f} ({r['records_per_cpu_s_min']:,.0f}.." \
            f"{r['records_per_cpu_s_max']:,.0f})"
        label = LABELS[r["source"]] % meta["value_size"] if r["source"] == "numpy" \
            else LABELS[r["source"]]
        if r["tree"]:
            label += f" ({r['tree']}: {meta['trees'][r['tree']]})"
        ratio = "" if r["cpu_ratio"] is None else f"{r['cpu_ratio']:.2f}x"
        out.append(f"| {label} | {r['records_per_s']:,.0f} ({r['records_per_s_min']:,.0f}.."
                   f"{r['records_per_s_max']:,.0f}) | {per_core} | "
                   f"{r['records_per_s'] / first['records_per_s']:.2f}x | {ratio} |")
    m = meta["machine"]
    out += ["", f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python "
            f"{m['python']}. Versions: " + ", ".join(f"{k} {v}" for k, v in
                                                     meta["versions"].items()) + ".",
            f"Command: `{meta['command']}` ({meta['date']}, {meta['elapsed_s']} s).", ""]
    return "\n".join(out)


def _broker(kind: str):
    if kind == "mock":
        import _mock_broker
        return _mock_broker.MockBroker(), _mock_broker.LABEL
    compare.broker_data_on_tmpfs()
    return compare.Broker(), "one Apache Kafka node, data on a tmpfs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka")
    ap.add_argument("--rows", type=int, default=ROWS, help="records per run")
    ap.add_argument("--chunk", type=int, default=CHUNK, help="rows per send_batch call")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--value-size", type=int, default=VALUE_SIZE)
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--before", help="a git commit to compare with (see above)")
    ap.add_argument("--after", help="with --before: a commit instead of the working tree")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    sources = [s for s in args.sources.split(",") if s]
    if not sources or set(sources) - set(SOURCES):
        ap.error("--sources: a comma-separated list of " + ", ".join(SOURCES))
    if min(args.rows, args.chunk, args.rounds, args.value_size) <= 0:
        ap.error("--rows, --chunk, --rounds and --value-size must be positive")
    t0, runs, trees, names = time.monotonic(), [], {"": None}, {}
    if args.before:
        trees = {"before": before_after.build_tree(args.before),
                 "after": before_after.build_tree(args.after) if args.after else None}
        names = {"before": args.before, "after": args.after or "working tree"}
    broker, label = _broker(args.broker)
    with broker:
        warm = min(args.rows, WARM_ROWS)
        run_one(broker, {"source": sources[-1], "rows": warm, "chunk": min(args.chunk, warm),
                         "value_size": args.value_size, "round": -1})
        for rnd in range(args.rounds):
            for source, tree in [(s, t) for s in compare._rotate(sources, rnd)
                                 for t in compare._rotate(list(trees), rnd)]:
                spec = {"source": source, "rows": args.rows, "chunk": args.chunk,
                        "value_size": args.value_size, "round": rnd, "tree": tree}
                runs.append(run_one(broker, spec, trees[tree]))
                r = runs[-1]
                print(f"round {rnd + 1}/{args.rounds} {source} {tree}: "
                      f"{r['records'] / r['wall_s']:,.0f} records/s, "
                      f"{r['records'] / r['cpu_s']:,.0f} records/CPU s", file=sys.stderr,
                      flush=True)
    versions = compare.versions(())
    if args.broker == "mock":
        import _mock_broker
        versions.pop("kafka_broker", None)
        versions["mock"] = _mock_broker.version()
    import numpy
    import pyarrow
    versions.update(numpy=numpy.__version__, pyarrow=pyarrow.__version__)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.executable),
                                 "bench/send_batch_columns.py"] +
                                list(sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": versions, "broker": args.broker,
            "broker_label": label, "rows": args.rows, "chunk": args.chunk,
            "value_size": args.value_size, "rounds": args.rounds, "trees": names,
            "elapsed_s": round(time.monotonic() - t0, 1)}
    rows = summarize(runs)
    before_after.write(os.path.join(args.out_dir, f"send_batch_columns_{args.broker}"),
                       {"meta": meta, "rows": rows, "runs": runs}, markdown(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
