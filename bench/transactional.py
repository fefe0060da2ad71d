"""compare.py's `transactional` workload in steady state, on Apache Kafka and on librdkafka's
mock cluster: pyprod, confluent-kafka and kafka-python in the same run on the same broker.

100-byte keyless values, 6 partitions, acks=all, idempotence, linger_ms=5; each client opens a
transaction, sends 10,000 records and commits, over and over. Every client sends the same
number of records, by default enough that buffer_memory (32 MiB, every client's default) holds
under 5% of a run (~5.6M records; a transaction itself is ~1.2 MB, so the buffer is never the
bound). Apache Kafka: one node, its data on a tmpfs (/dev/shm), each run's topic deleted, after
compare.py's warm-up passes. The mock cluster stores batches without decoding them: there the
client's own cost is the bound. Each run is its own process; clients interleaved, order
rotated, medians over rounds; CPU per record is the client process's (getrusage).

    python bench/transactional.py                        # both brokers, 3 rounds
    python bench/transactional.py --brokers mock --rounds 1 --records 200000

Writes bench/results/transactional.json and .md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import _mock_broker
import before_after
import compare

WORKLOAD = "transactional"
CLIENTS = ("pyprod", "confluent-kafka", "kafka-python")
BROKERS = {"kafka": "Apache Kafka (1 node, tmpfs)", "mock": _mock_broker.LABEL}
SKIP = {("mock", "kafka-python"): "kafka-python 3.0.12's init_transactions() times out against "
                                  "the mock cluster (it bootstraps with api_version=(2, 8))"}


def run_broker(kind: str, clients: list, records: int, rounds: int) -> list:
    """Every client ``rounds`` times on one broker of ``kind``; the runs."""
    specs = [dict(compare.workload_spec(WORKLOAD), client=c, records=records, rate=None)
             for c in clients if (kind, c) not in SKIP]
    runs = []
    with (_mock_broker.MockBroker() if kind == "mock" else compare.Broker()) as broker:
        compare.warm_broker(broker, clients, [WORKLOAD], min(records, 300_000))
        for rnd in range(rounds):
            for spec in compare._rotate(specs, rnd):
                res = compare.run_one(broker, spec)
                res.update(round=rnd, broker=kind)
                runs.append(res)
                print(f"{kind} round {rnd + 1}/{rounds} {spec['client']:>15}: "
                      f"{res['records'] / res['wall_s']:,.0f} records/s, "
                      f"{res['cpu_s'] / res['records'] * 1e6:.2f} CPU s/M",
                      file=sys.stderr, flush=True)
    return runs


def rows_of(runs: list, brokers: list) -> list:
    """compare.summarize per broker, each row tagged with its broker."""
    rows = []
    for kind in brokers:
        for row in compare.summarize([r for r in runs if r["broker"] == kind]):
            rows.append(dict(row, broker=kind))
    return rows


def _ratio(a, b, fmt=".2f"):
    return "—" if not a or not b else f"{a / b:{fmt}}x"


def markdown(meta: dict, rows: list) -> str:
    m = meta["machine"]
    lines = [f"# Transactional producers, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python {m['python']}.",
             "Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "",
             f"Workload: {compare.DESCRIBE[WORKLOAD]}; {compare.PARTITIONS} partitions, "
             f"linger_ms={compare.LINGER_MS}, each client's default batch size and "
             f"buffer_memory (32 MiB). {meta['records']:,} records per run for every client"
             + (" (buffer_memory under 5% of a run)" if meta["steady_state"] else
                " (a short run: not steady state)") + ". Medians of "
             f"{meta['rounds']} interleaved rounds, each run in its own process.", "",
             "| broker | client | records/s (min..max) | CPU s / M records | broker CPU s / M "
             "| peak RSS MB | pyprod / client records/s | client / pyprod CPU per record |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    mine = {r["broker"]: r for r in rows if r["client"] == "pyprod"}
    for r in rows:
        p = mine.get(r["broker"], {})
        other = r["client"] != "pyprod"
        lines.append(
            f"| {BROKERS[r['broker']]} | {r['client']} | {r['records_per_s']:,.0f} "
            f"({r['min_records_per_s']:,.0f}..{r['max_records_per_s']:,.0f}) | "
            f"{r['cpu_s_per_m']:.2f} | {compare._num(r.get('broker_cpu_s_per_m'), '.2f')} | "
            f"{r['peak_rss_mb']:.0f} | "
            f"{_ratio(p.get('records_per_s'), r['records_per_s']) if other else '—'} | "
            f"{_ratio(r['cpu_s_per_m'], p.get('cpu_s_per_m')) if other else '—'} |")
    lines += ["", "Broker CPU: the broker process's CPU during the client's run, per million "
              "records (the mock cluster runs in its own process); broker and clients share the "
              "machine's cores. Each run's landed count (end offsets) is checked: the records "
              "plus at most one commit marker per partition per transaction."]
    for (kind, client), why in SKIP.items():
        if kind in meta["brokers"] and client in meta["clients"]:
            lines.append(f"Not run: {client} on the {BROKERS[kind]}: {why}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="kafka,mock", help="kafka, mock or both")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--records", type=int, default=None,
                    help="records per run (default: buffer_memory under 5%% of a run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", default="transactional")
    args = ap.parse_args(argv)
    brokers = [b for b in args.brokers.split(",") if b]
    clients = [compare.ALIASES.get(c, c) for c in args.clients.split(",") if c]
    if not brokers or any(b not in BROKERS for b in brokers):
        ap.error(f"--brokers: choose from {', '.join(BROKERS)}")
    if not clients or any(c not in CLIENTS for c in clients):
        ap.error(f"--clients: choose from {', '.join(CLIENTS)}")
    if args.rounds <= 0 or (args.records is not None and args.records <= 0):
        ap.error("--rounds and --records must be positive")
    records = args.records or before_after.records_for_steady_state(
        compare.WORKLOADS[WORKLOAD]["value_size"])
    compare.broker_data_on_tmpfs()
    t0, runs = time.monotonic(), []
    for kind in brokers:
        runs += run_broker(kind, clients, records, args.rounds)
    versions = compare.versions(clients)
    if "mock" in brokers:
        versions["mock"] = _mock_broker.version()
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/transactional.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": versions, "rounds": args.rounds,
            "records": records, "brokers": brokers, "clients": clients,
            "steady_state": records >= before_after.records_for_steady_state(
                compare.WORKLOADS[WORKLOAD]["value_size"]),
            "elapsed_s": round(time.monotonic() - t0, 1)}
    rows = rows_of(runs, brokers)
    before_after.write(os.path.join(args.out_dir, args.name),
                       {"meta": meta, "rows": rows, "runs": runs}, markdown(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
