"""pyprod before and after a change, in the same run on the same broker, in steady state.

Builds the ``--before`` commit's kcore in a git worktree, then runs compare.py's pyprod child
from each tree (PYTHONPATH selects which pyprod it imports), interleaved, >= 3 rounds with the
order rotated: compare.py's workloads with one caller thread (6 partitions; acks=1 and
linger_ms=5 unless the workload says otherwise), and 100-byte values from 2 and 4 caller
threads sharing one producer. Each run sends enough records that buffer_memory holds under 5%
of them; each run's topic is deleted after it is counted, and the broker started here
keeps its data on a tmpfs (/dev/shm).

    python bench/before_after.py --before 6d9ecb3              # Apache Kafka, 1 node
    python bench/before_after.py --before 6d9ecb3 --broker mock  # librdkafka's mock cluster

Writes bench/results/before_after[_mock].json and .md: records/s (median, min..max), CPU
seconds per million records (the client process's), after/before ratios, and one thread's
rate against four threads' in each tree. Only the caller threads:

    python bench/before_after.py --before 6d9ecb3 --workloads 100B --threads 1,2,4
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import compare  # noqa: E402
from _workloads import records_for_steady_state  # noqa: E402
import _mock_broker  # noqa: E402

WORKLOADS = ("100B", "100B-keyed", "100B-callbacks", "1KiB", "lz4", "zstd",
             "acks-all-idempotent")
THREADS = (1, 2, 4)  # 100B only


def shape(workload, threads):
    return workload if threads == 1 else f"{workload}-{threads}t"


def build_tree(rev: str) -> str:
    """A worktree of ``rev`` with its kcore built in place; returns its src directory."""
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", rev], check=True,
                         capture_output=True, text=True).stdout.strip()  # (HEAD moves)
    path = os.path.join(tempfile.gettempdir(), "pyprod-at-" + rev)
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, rev], check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "-j2"],
                   cwd=path, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(path, "src")


def run_in(src: str, broker, spec: dict) -> dict:
    """compare.run_one with the child importing pyprod from ``src``."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    try:
        return compare.run_one(broker, spec)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def summarize(runs: list) -> dict:
    """(tree, shape) -> median records/s, min, max, median CPU s per M records."""
    out = {}
    for key in {(r["tree"], r["shape"]) for r in runs}:
        rs = [r for r in runs if (r["tree"], r["shape"]) == key]
        rates = [r["records"] / r["wall_s"] for r in rs]
        cpu = [r["process_cpu_s"] / r["records"] * 1e6 for r in rs]
        out[key] = {"records_per_s": statistics.median(rates), "min": min(rates),
                    "max": max(rates), "cpu_s_per_m": statistics.median(cpu), "runs": len(rs)}
    return out


def paired(runs: list, name: str, key) -> float | None:
    """The median over rounds of after/before for one shape: the two runs of a round are
    adjacent, so a slow spell of the machine weighs on both."""
    ratios = []
    for rnd in {r["round"] for r in runs}:
        pair = {r["tree"]: key(r) for r in runs if r["round"] == rnd and r["shape"] == name}
        if len(pair) == 2:
            ratios.append(pair["after"] / pair["before"])
    return statistics.median(ratios) if ratios else None


def markdown(meta: dict, rows: dict, runs: list) -> str:
    lines = [f"# pyprod before ({meta['before']}) and after ({meta['after']}) on the "
             f"{meta['broker']}, {meta['date']}", "",
             f"Machine: {meta['machine']['cpu_model']}, {meta['machine']['cores']} cores. "
             f"Command: `{meta['command']}`. Medians of {meta['rounds']} interleaved rounds; "
             "each run's records are sized so that buffer_memory (32 MiB) holds under 5% of "
             "them (100-byte values: "
             f"{records_for_steady_state(100):,}; 1 KiB: {records_for_steady_state(1024):,}); "
             "6 partitions, acks=1 and linger_ms=5 unless the workload says otherwise; "
             "`-Nt`: N caller threads sharing one producer.", "",
             "The ratios are the medians over rounds of after/before in the same round (the "
             "two runs are adjacent).", "",
             "| workload | before records/s (min..max) | after records/s (min..max) | ratio | "
             "before CPU s/M | after CPU s/M | ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in meta["shapes"]:
        b, a = rows.get(("before", name)), rows.get(("after", name))
        if not (a and b):
            continue
        lines.append(
            f"| {name} | {b['records_per_s']:,.0f} ({b['min']:,.0f}..{b['max']:,.0f}) | "
            f"{a['records_per_s']:,.0f} ({a['min']:,.0f}..{a['max']:,.0f}) | "
            f"{paired(runs, name, lambda r: r['records'] / r['wall_s']):.2f}x | "
            f"{b['cpu_s_per_m']:.2f} | {a['cpu_s_per_m']:.2f} | "
            f"{paired(runs, name, lambda r: r['process_cpu_s'] / r['records']):.2f}x |")
    lines.append("")
    for tree in ("before", "after"):
        one, four = rows.get((tree, "100B")), rows.get((tree, "100B-4t"))
        if one and four:
            lines.append(f"- {tree}: one caller thread sends "
                         f"{one['records_per_s'] / four['records_per_s']:.2f}x the records/s "
                         "of four.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the git commit to compare against")
    ap.add_argument("--after", help="a git commit to measure instead of the working tree")
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=None,
                    help="records per run (never fewer than steady state needs: "
                         "buffer_memory holds under 5%% of a run)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--threads", default=",".join(map(str, THREADS)),
                    help="caller thread counts for the 100B workload")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", help="result file names (default before_after[_mock])")
    args = ap.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in compare.WORKLOADS or compare.WORKLOADS[w].get("security"):
            ap.error(f"unknown or secured workload {w!r}")
    shapes = [(w, 1) for w in workloads] + [
        ("100B", int(t)) for t in args.threads.split(",") if int(t) != 1]
    trees = {"before": build_tree(args.before),
             "after": build_tree(args.after) if args.after else os.path.join(ROOT, "src")}
    after = args.after or subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True).stdout.strip()
    compare.broker_data_on_tmpfs()
    specs = [dict(compare.workload_spec(w), client="pyprod", workload=f"{tree}-{shape(w, t)}",
                  shape=shape(w, t), partitions=6, threads=t, rate=None, tree=tree,
                  records=max(args.records or 0, records_for_steady_state(
                      compare.WORKLOADS[w]["value_size"])))
             for w, t in shapes for tree in trees]
    runs = []
    mock = args.broker == "mock"
    with (_mock_broker.MockBroker() if mock else compare.Broker()) as broker:
        compare.warm_broker(broker, ["pyprod"], ["100B"], 300_000)
        for rnd in range(args.rounds):
            for spec in compare._rotate(specs, rnd):
                res = run_in(trees[spec["tree"]], broker, spec)
                res.update(round=rnd, tree=spec["tree"], shape=spec["shape"])
                runs.append(res)
                print(f"round {rnd + 1}/{args.rounds} {spec['workload']:>10}: "
                      f"{res['records'] / res['wall_s']:,.0f} records/s, "
                      f"{res['process_cpu_s'] / res['records'] * 1e6:.2f} CPU s/M",
                      file=sys.stderr, flush=True)
    rows = summarize(runs)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/before_after.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "before": args.before, "after": after,
            "broker": _mock_broker.LABEL if mock else "Apache Kafka broker (1 node, tmpfs)",
            "rounds": args.rounds, "shapes": [shape(w, t) for w, t in shapes]}
    base = os.path.join(args.out_dir, args.name or ("before_after" + ("_mock" if mock else "")))
    write(base, {"meta": meta, "rows": {f"{k[0]} {k[1]}": v for k, v in rows.items()},
                 "runs": runs}, markdown(meta, rows, runs))
    return 0


def write(base: str, data: dict, text: str) -> None:
    """BASE.json and BASE.md; the table on stdout too."""
    os.makedirs(os.path.dirname(base) or ".", exist_ok=True)
    with open(base + ".json", "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
