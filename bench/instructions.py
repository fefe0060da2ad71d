"""Instructions per record of pyprod at two commits, counted by valgrind's callgrind.

Wall-clock CPU per record on a shared VM moves by tens of percent from one run to the next;
instruction counts do not. Each tree's producer (one caller thread, 100-byte values, 6
partitions, linger_ms=1000 so that batches close full at batch_size whatever the speed under
valgrind) sends N records to librdkafka's mock cluster under callgrind, twice: with a small and
a large N. The difference divided by the extra records is the steady-state cost of one record,
both threads of the client included (the caller's send() and the Sender's loop); the import,
the connections and the first metadata fall out of it.

    python bench/instructions.py --before 6d9ecb3 --after HEAD [--idempotent]

Writes bench/results/instructions[_idempotent].md and .json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _mock_broker  # noqa: E402
import before_after  # noqa: E402
import compare  # noqa: E402

CHILD = os.path.join(HERE, "_instructions_child.py")


def count(src: str, broker, records: int, idempotent: bool) -> int:
    """Instructions (callgrind's Ir) of one child run, importing pyprod from ``src``."""
    topic = "ir-" + uuid.uuid4().hex[:8]
    broker.create(topic, 6)
    spec = {"bootstrap": broker.bootstrap, "topic": topic, "records": records,
            "idempotent": idempotent, "api_version": _mock_broker.API_VERSION}
    out = os.path.join(tempfile.gettempdir(), f"callgrind.{uuid.uuid4().hex[:8]}.out")
    env = dict(os.environ, PYTHONPATH=src)
    try:
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                        sys.executable, CHILD, json.dumps(spec)],
                       env=env, check=True, capture_output=True)
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    finally:
        if os.path.exists(out):
            os.unlink(out)
    raise RuntimeError("callgrind wrote no totals")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--idempotent", action="store_true", help="acks=all, idempotence on")
    ap.add_argument("--small", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=500_000)
    ap.add_argument("--out-dir", default=compare.RESULTS)
    args = ap.parse_args(argv)
    trees = {"before": before_after.build_tree(args.before),
             "after": before_after.build_tree(args.after)}
    rows = {}
    with _mock_broker.MockBroker() as broker:
        for name, src in trees.items():
            small = count(src, broker, args.small, args.idempotent)
            large = count(src, broker, args.large, args.idempotent)
            rows[name] = {"small": small, "large": large,
                          "per_record": (large - small) / (args.large - args.small),
                          "fixed": small - (large - small) / (args.large - args.small) *
                          args.small}
            print(f"{name}: {rows[name]['per_record']:,.0f} instructions per record",
                  file=sys.stderr, flush=True)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/instructions.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "before": args.before, "after": args.after, "idempotent": args.idempotent,
            "records": [args.small, args.large]}
    b, a = rows["before"], rows["after"]
    text = (f"# Instructions per record, {args.before} and {args.after}, {meta['date']}\n\n"
            f"Command: `{meta['command']}`. callgrind's instruction count of one producer "
            f"(100-byte values, 6 partitions, "
            f"{'acks=all, idempotent' if args.idempotent else 'acks=1'}) against librdkafka's "
            f"mock cluster, {args.small:,} and {args.large:,} records; per record is the "
            "difference over the extra records (both client threads).\n\n"
            "| tree | instructions per record | fixed (import, connect, metadata) |\n"
            "|---|---:|---:|\n"
            f"| {args.before} | {b['per_record']:,.0f} | {b['fixed'] / 1e6:,.0f} M |\n"
            f"| {args.after} | {a['per_record']:,.0f} | {a['fixed'] / 1e6:,.0f} M |\n\n"
            f"After/before: {a['per_record'] / b['per_record']:.3f}x per record.\n")
    base = os.path.join(args.out_dir, "instructions" + ("_idempotent" if args.idempotent else ""))
    before_after.write(base, {"meta": meta, "rows": rows}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
