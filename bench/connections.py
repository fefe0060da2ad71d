"""The broker's bound on one connection: one producer against two, at 1 KiB.

A Kafka broker handles one request at a time per connection: it reads a connection's next
request only once it has answered the last. pyprod, confluent-kafka and Java's producer all
keep one connection per broker, so when the broker's work per record is large (1 KiB values),
none can send faster than that one connection lets it. This runs compare.py's 1KiB workload
with 1, then 2 producer processes at once (two connections; the records split between them;
their timed sends start together) for pyprod and confluent-kafka, on one Apache Kafka broker,
and reports the records/s of the whole shape, the broker's CPU per record and the clients'.

    python bench/connections.py                           # 250,000 records per run, 5 rounds
    python bench/connections.py --records 50000 --rounds 1    # smoke run

Writes bench/results/connections.json and .md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402

CLIENTS = ("pyprod", "confluent-kafka")
PRODUCERS = (1, 2)
WORKLOAD = "1KiB"
START_DELAY_S = 5.0  # time for the children to start, connect and warm up before the gate


def run_shape(broker, client: str, producers: int, records: int) -> dict:
    """One run: ``producers`` processes of ``client`` on one new topic, sends started
    together; every record must land."""
    spec = dict(compare.workload_spec(WORKLOAD), client=client, workload=WORKLOAD, rate=None,
                threads=1, partitions=compare.PARTITIONS)
    bootstrap, security = broker.client_address(spec)
    topic = f"conn-{client}-{producers}-{uuid.uuid4().hex[:8]}"
    broker.create(topic, spec["partitions"])
    start_at = time.time() + START_DELAY_S
    specs = [dict(spec, bootstrap=bootstrap, security_config=security, topic=topic,
                  records=n, start_at=start_at)
             for n in compare._split(records, producers)]
    results, errors = [None] * producers, []
    timeout = 120 + START_DELAY_S + records / 5_000

    def one(i):
        try:
            results[i] = compare.run_python_client(specs[i], timeout)
        except Exception as e:  # noqa: BLE001 - re-raised below
            errors.append(e)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(producers)]
    for t in ts:
        t.start()
    time.sleep(max(0.0, start_at - time.time()))
    cpu0 = broker.cpu_s()  # from the gate: the children's start and warm-up left out
    for t in ts:
        t.join()
    cpu1 = broker.cpu_s()
    if errors:
        raise errors[0]
    landed = broker.count(topic)
    broker.delete(topic)
    expected = records + producers * spec["partitions"]  # each child's warm-up records
    if landed != expected:
        raise RuntimeError(f"{client} x{producers}: {landed} records in {topic}, "
                           f"expected {expected}")
    wall = max(r["wall_s"] for r in results)
    return {"client": client, "producers": producers, "records": records, "wall_s": wall,
            "records_per_s": records / wall, "client_cpu_s": sum(r["cpu_s"] for r in results),
            "broker_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
            "each_wall_s": [r["wall_s"] for r in results]}


def summarize(runs: list, clients) -> list:
    rows = []
    for c in clients:
        for n in PRODUCERS:
            mine = [r for r in runs if r["client"] == c and r["producers"] == n]
            if not mine:
                continue
            rate = [r["records_per_s"] for r in mine]
            broker = [r["broker_cpu_s"] / r["records"] * 1e6 for r in mine
                      if r["broker_cpu_s"] is not None]
            rows.append({"client": c, "producers": n, "rounds": len(mine),
                         "records_per_s": statistics.median(rate), "min": min(rate),
                         "max": max(rate),
                         "client_cpu_s_per_m": statistics.median(
                             r["client_cpu_s"] / r["records"] * 1e6 for r in mine),
                         "broker_cpu_s_per_m": statistics.median(broker) if broker else None})
    return rows


def _rate(rows, client, n):
    for r in rows:
        if r["client"] == client and r["producers"] == n:
            return r["records_per_s"]
    return None


def markdown(meta: dict, rows: list) -> str:
    v = meta["versions"]
    lines = [f"# One connection against two, {meta['date']}", "",
             f"Machine: {meta['machine']['cpu_model']}, {meta['machine']['cores']} cores, "
             f"Python {meta['machine']['python']}. Versions: "
             + "; ".join(f"{k} {x}" for k, x in v.items()) + ".",
             f"Command: `{meta['command']}`.", "",
             "One Apache Kafka broker on the same machine; 1 KiB values, keyless, "
             f"{compare.PARTITIONS} partitions, acks=1, linger_ms={compare.LINGER_MS}, each "
             f"client's default batch size. Each run sends {meta['records']:,} records in all: "
             "from one producer process (one connection to the broker), or from two at once "
             "(two connections, half each, their timed sends started together; the run's time "
             "is the slower one's; broker CPU is counted from the start of the timed sends). "
             f"Medians of {meta['rounds']} interleaved rounds.", "",
             "| client | producers | records/s (min..max) | against one producer | "
             "client CPU s / M | broker CPU s / M |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        one = _rate(rows, r["client"], 1)
        ratio = f"{r['records_per_s'] / one:.2f}x" if one else "—"
        broker = "—" if r["broker_cpu_s_per_m"] is None else f"{r['broker_cpu_s_per_m']:.2f}"
        lines.append(f"| {r['client']} | {r['producers']} | {r['records_per_s']:,.0f} "
                     f"({r['min']:,.0f}..{r['max']:,.0f}) | {ratio} | "
                     f"{r['client_cpu_s_per_m']:.2f} | {broker} |")
    lines.append("")
    for n in PRODUCERS:
        a, b = _rate(rows, "pyprod", n), _rate(rows, "confluent-kafka", n)
        if a and b:
            lines.append(f"- {n} producer{'s' if n > 1 else ''}: pyprod {a / b:.2f}x "
                         "confluent-kafka's records/s.")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=250_000,
                    help="records per run, all producers together (default 250,000, as "
                         "compare.py's 1KiB: more would fill the page cache and wait for "
                         "the disk)")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", default="connections", help="result file names")
    args = ap.parse_args(argv)
    if args.rounds <= 0 or args.records <= 0:
        ap.error("--rounds and --records must be positive")
    clients = compare._names(ap, args.clients, CLIENTS, "client", compare.ALIASES)
    shapes = [(c, n) for n in PRODUCERS for c in clients]
    runs = []
    with compare.Broker(args.bootstrap_servers) as broker:
        compare.warm_broker(broker, clients, [WORKLOAD], min(args.records, 300_000))
        for rnd in range(args.rounds):
            for c, n in compare._rotate(shapes, rnd):
                res = run_shape(broker, c, n, args.records)
                res["round"] = rnd
                runs.append(res)
                print(f"round {rnd + 1}/{args.rounds} {c:>15} x{n}: "
                      f"{res['records_per_s']:,.0f} records/s", file=sys.stderr, flush=True)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/connections.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": compare.versions(clients),
            "clients": clients, "rounds": args.rounds, "records": args.records}
    rows = summarize(runs, clients)
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, args.name)
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows, "runs": runs}, f, indent=2)
        f.write("\n")
    text = markdown(meta, rows)
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {base}.json, .md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
