"""What pyprod.otel costs send(): 100-byte values from one thread to librdkafka's mock cluster
(the client is the bound), three ways in one run, each in its own process, interleaved:
`off` (not instrumented), `on, no span` (instrumented, no active span: the records go out
untouched) and `on, in a span` (a PRODUCER span and a traceparent header per record; the SDK's
TracerProvider with no exporter). Records/s and CPU s per million records, medians. Every
mode uses buffer_memory=4 MiB, so that it holds under 5% of a run (1M records of ~120 bytes):
steady state. The runs in a span send fewer records (--span-records): each takes about 25 us.

    python bench/otel_cost.py                 # 5M records per run (200k in a span), 3 rounds
    python bench/otel_cost.py --records 200000 --rounds 1

Writes bench/results/otel_cost.json and .md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import _mock_broker
import before_after
import compare

MODES = ("off", "on, no span", "on, in a span")
BUFFER_MEMORY = 4 * 1024 * 1024  # under 5% of the default run


def child(mode: str, bootstrap: str, topic: str, records: int) -> dict:
    from pyprod import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=_mock_broker.API_VERSION,
                      linger_ms=5, buffer_memory=BUFFER_MEMORY)
    span = None
    if mode != "off":
        from opentelemetry.sdk.trace import TracerProvider

        from pyprod.otel import instrument
        provider = TracerProvider()
        instrument(p, tracer_provider=provider, metrics=False)
        if mode == "on, in a span":
            span = provider.get_tracer("bench").start_as_current_span("request")
            span.__enter__()
    value, send = b"x" * 100, p.send
    send(topic, value).get(30)
    c0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    t0 = time.perf_counter()
    for _ in range(records):
        send(topic, value)
    p.flush()
    wall = time.perf_counter() - t0
    cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - c0
    if span is not None:
        span.__exit__(None, None, None)
    p.close()
    return {"mode": mode, "records": records, "wall_s": wall, "cpu_s": cpu}


def markdown(meta: dict, rows: list) -> str:
    base = next(r for r in rows if r["mode"] == "off")
    lines = [f"# pyprod.otel's cost, {meta['date']}", "",
             f"Machine: {meta['machine']['cpu_model']}, {meta['machine']['cores']} cores. "
             f"pyprod {meta['versions']['pyprod']}; {_mock_broker.version()} mock cluster.",
             f"Command: `{meta['command']}`.", "",
             f"send() of 100-byte values, one thread, {meta['records']:,} records per run "
             f"({meta.get('span_records', meta['records']):,} in a span), "
             f"buffer_memory {BUFFER_MEMORY // 1024 // 1024} MiB, medians of {meta['rounds']} "
             "interleaved rounds.", "",
             "| mode | records/s | CPU s / M records | records/s vs off | CPU per record vs off |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['records_per_s']:,.0f} | {r['cpu_s_per_m']:.3f} | "
                     f"{r['records_per_s'] / base['records_per_s']:.2f}x | "
                     f"{r['cpu_s_per_m'] / base['cpu_s_per_m']:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--span-records", type=int, default=200_000,
                    help="records of the in-a-span runs (about 25 us each)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(**json.loads(args.child))))
        return 0
    runs = []
    with _mock_broker.MockBroker() as broker:
        for rnd in range(args.rounds):
            for mode in compare._rotate(list(MODES), rnd):
                topic = f"otel-{rnd}-{MODES.index(mode)}"
                broker.create(topic, compare.PARTITIONS)
                spec = {"mode": mode, "bootstrap": broker.bootstrap, "topic": topic,
                        "records": args.span_records if mode == MODES[2] else args.records}
                out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                                     capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(f"{mode} run failed:\n{out.stderr[-3000:]}")
                runs.append(json.loads(out.stdout.splitlines()[-1]))
                r = runs[-1]
                print(f"round {rnd + 1} {mode:>14}: {r['records'] / r['wall_s']:,.0f} "
                      f"records/s", file=sys.stderr, flush=True)
    rows = [{"mode": m,
             "records_per_s": statistics.median(r["records"] / r["wall_s"] for r in rs),
             "cpu_s_per_m": statistics.median(r["cpu_s"] / r["records"] * 1e6 for r in rs)}
            for m in MODES for rs in [[r for r in runs if r["mode"] == m]]]
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/otel_cost.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": compare.versions(()),
            "records": args.records, "span_records": args.span_records, "rounds": args.rounds}
    before_after.write(os.path.join(args.out_dir, "otel_cost"),
                       {"meta": meta, "rows": rows, "runs": runs}, markdown(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
