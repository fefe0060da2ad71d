"""Delivery under broker faults: pyprod, kafka-python and confluent-kafka side by side.

One 3-node Apache Kafka cluster (KRaft, replication factor 3, min.insync.replicas=2). Each
client, in turn, writes the same keyed records (acks=all, idempotence on) to a fresh 6-partition
topic while tests.harness's FaultInjector rotates faults over the brokers: SIGKILL of a
partition leader and restart, SIGSTOP/SIGCONT of a leader for 3 s, graceful restart of a leader,
SIGKILL of the active controller and restart (the cluster whole again, ISR >= 2, before the next).
The records are paced so that they span every fault. The topic is then read back with
kafka-python and audited (tests.harness.fault_run): futures never completed, acknowledged
records lost, duplicates, per-key order, acknowledged offsets, and the sequence numbers the
leaders stored (DumpLogSegments).

Scenarios: "rotation" (the above, delivery timeout 120 s: nothing should fail) and "expiry"
(40k records, 4 faults: leader SIGSTOP for 6 s and leader SIGKILL, delivery timeout 2.5 s and
request timeout 2 s: batches expire, some in flight, so the idempotent producer must reset its
producer id or epoch without duplicating anything).

    python bench/faults.py                    # both scenarios, all three clients
    python bench/faults.py --records 20000 --faults 4 --clients pyprod --scenarios rotation

Writes bench/results/faults.json and faults.md; each client's log (pyprod at DEBUG, the
injector, the client's own) goes to --log-dir.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))  # the repository root: tests.harness

import compare  # noqa: E402
from tests.harness.kafka_cluster import KafkaCluster  # noqa: E402
from tests.harness.fault_injector import KINDS  # noqa: E402
from tests.harness.fault_run import (  # noqa: E402
    CLIENTS, PRODUCER_CONFIG, SHORT_DELIVERY_TIMEOUT, run_under_faults)

PARTITIONS = 6
SCENARIOS = ("rotation", "expiry")
EXPIRY = dict(records=40_000, faults=4, kinds=("pause", "kill_leader"), pause_s=6.0)
COLUMNS = (  # (row key, header)
    ("acked", "acked"), ("failed", "failed futures"), ("unresolved", "unresolved futures"),
    ("lost_acked", "lost acked"), ("duplicates", "duplicates"),
    ("order_violations", "order violations"),
    ("order_violations_acked", "order violations between acked"),
    ("offset_mismatches", "offset mismatches"),
    ("sequence_gaps", "stored sequence gaps"), ("producer_epochs", "producer id/epochs"),
    ("faults", "faults applied"), ("wall_s", "wall s"))
PROBLEMS = ("unresolved", "lost_acked", "duplicates", "order_violations", "offset_mismatches",
            "sequence_gaps")


def row_of(result) -> dict:
    """The table row of a fault_run.RunResult (as a dict)."""
    a, seq = result["audit"], result["sequences"]
    row = {"scenario": result["scenario"], "client": result["client"],
           "records": result["records"],
           **{k: a[k] for k in ("acked", "failed", "unresolved", "lost_acked", "duplicates",
                                "order_violations", "order_violations_acked",
                                "offset_mismatches", "failed_but_written",
                                "foreign", "errors")},
           "sequence_gaps": seq.get("gaps"), "producer_epochs": len(seq.get("epochs", [])) or None,
           "faults": result["fault_summary"]["applied"],
           "faults_by_kind": result["fault_summary"]["by_kind"],
           "wall_s": result["wall_s"], "send_s": result["send_s"],
           "first_read_missing": result["readback"]["first_read_missing"],
           "injector_error": result["injector_error"]}
    bad = [k for k in PROBLEMS if row.get(k)] + (["foreign"] if row["foreign"] else [])
    if seq.get("error"):
        bad.append("sequence check failed")
    row["verdict"] = "ok" if not bad and not row["injector_error"] else "FAIL: " + ", ".join(bad)
    return row


def _cell(v):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _table(rows) -> list:
    lines = ["| client | records | " + " | ".join(h for _, h in COLUMNS) + " | verdict |",
             "|---|---:|" + "---:|" * len(COLUMNS) + "---|"]
    for r in rows:
        lines.append(f"| {r['client']} | {_cell(r['records'])} | "
                     + " | ".join(_cell(r[k]) for k, _ in COLUMNS) + f" | {r['verdict']} |")
    return lines


def _describe(meta, scenario) -> str:
    sc = meta["scenarios"][scenario]
    what = (f"{sc['records']:,} records with {meta['keys']} keys, acks=all, idempotence on, "
            f"paced over {sc['faults']} faults in rotation ({', '.join(sc['kinds'])}; SIGSTOP "
            f"{sc['pause_s']:g} s; seed {meta['seed']}). ")
    if scenario == "rotation":
        return what + "Request timeout 5 s, delivery timeout 120 s for every client."
    return what + ("Request timeout 2 s, delivery timeout 2.5 s for every client: shorter than a "
                   "failover, so futures fail with a timeout (allowed) and some of those "
                   "records are written all the same (allowed); the producer id/epoch must "
                   "change without a duplicate or a lost acknowledged record.")


def markdown(meta: dict, rows: list, results: list) -> str:
    m = meta["machine"]
    lines = [f"# Delivery under broker faults, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python {m['python']}.",
             "Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "",
             f"3-node Apache Kafka cluster (KRaft, combined mode) on the same machine; one fresh "
             f"topic per client and scenario, {PARTITIONS} partitions, replication factor 3, "
             "min.insync.replicas=2; read back with kafka-python. The settings of each client "
             "are in the JSON.", ""]
    for scenario in meta["scenarios"]:
        lines += [f"## Scenario {scenario}", "", _describe(meta, scenario), ""]
        lines += _table([r for r in rows if r["scenario"] == scenario]) + [""]
    lines += ["lost acked: acknowledged, not in the topic. duplicates: extra copies. order "
              "violations: a key's sequence number going backwards within its partition "
              "(between acked: both records acknowledged; otherwise one of them had a failed "
              "future). offset "
              "mismatches: an acknowledged record read at another offset than its future said. "
              "stored sequence gaps: batches whose base sequence does not follow the previous "
              "batch of the same producer id and epoch in the leaders' logs. producer "
              "id/epochs: distinct (producer id, epoch) pairs stored (1 = no reset). wall s: "
              "first send until flush returned (paced: it follows the faults, not the client's "
              "speed).", ""]
    for res in results:
        errors = res["audit"]["errors"]
        lines.append(f"### {res['scenario']}, {res['client']}: faults")
        lines.append("")
        lines.append(f"Errors of failed futures: {errors or 'none'}; failed but written: "
                     f"{res['audit']['failed_but_written']}; stored producer id/epochs: "
                     f"{res['sequences'].get('epochs')}; last record sent at "
                     f"{res['send_s']:.1f} s; acknowledged records missing from the first "
                     f"read-back: {res['readback']['first_read_missing']}"
                     + (" (read again)" if res["readback"]["reread"] else "") + ".")
        lines.append("")
        lines.append("| # | t s | fault | node | victim | down s | recovered s |")
        lines.append("|---:|---:|---|---:|---|---:|---:|")
        for f in res["faults"]:
            lines.append(f"| {f['index'] + 1} | {f['t']:.1f} | {f['kind']} | {f['node']} | "
                         f"{f['target'].replace(res['topic'], 'topic')} | {f['down_s']:.1f} | "
                         f"{f['recovered_s']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated subset of " + ",".join(CLIENTS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated subset of " + ",".join(SCENARIOS))
    ap.add_argument("--records", type=int, default=200_000, help="of the rotation scenario")
    ap.add_argument("--faults", type=int, default=20, help="of the rotation scenario")
    ap.add_argument("--keys", type=int, default=256)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--pause-s", type=float, default=3.0, help="SIGSTOP length")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", default="faults")
    ap.add_argument("--log-dir", default=None, help="client logs (default: a temp dir)")
    args = ap.parse_args(argv)
    for opt in ("records", "faults", "keys"):
        if getattr(args, opt) <= 0:
            ap.error(f"--{opt} must be positive")
    clients = compare._names(ap, args.clients, CLIENTS, "client", compare.ALIASES)
    scenarios = compare._names(ap, args.scenarios, SCENARIOS, "scenario")
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="pyprod-faults-")
    os.makedirs(log_dir, exist_ok=True)

    plans = {"rotation": dict(records=args.records, faults=args.faults, kinds=list(KINDS),
                              pause_s=args.pause_s),
             "expiry": dict(EXPIRY, kinds=list(EXPIRY["kinds"]))}
    plans = {k: v for k, v in plans.items() if k in scenarios}
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/faults.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": compare.versions(clients),
            "keys": args.keys, "seed": args.seed, "scenarios": plans,
            "partitions": PARTITIONS,
            "producer_config": {c: dict(PRODUCER_CONFIG[c]) for c in clients},
            "expiry_overrides": {c: SHORT_DELIVERY_TIMEOUT[c] for c in clients}}
    base = os.path.join(args.out_dir, args.name)
    os.makedirs(args.out_dir, exist_ok=True)
    results = []
    with KafkaCluster(nodes=3) as cluster:
        for scenario, plan in plans.items():
            for c in clients:
                topic = cluster.create_topic(f"faults-{scenario}-{c}-{int(time.time())}",
                                             PARTITIONS, 3, configs={"min.insync.replicas": "2"})
                log_path = os.path.join(log_dir, f"{scenario}-{c}.log")
                print(f"{scenario} {c}: {plan['records']:,} records, {plan['faults']} faults, "
                      f"log {log_path}", file=sys.stderr, flush=True)
                config = SHORT_DELIVERY_TIMEOUT[c] if scenario == "expiry" else None
                res = run_under_faults(c, cluster, topic, plan["records"], keys=args.keys,
                                       faults=plan["faults"], kinds=plan["kinds"],
                                       pause_s=plan["pause_s"], seed=args.seed, config=config,
                                       log_path=log_path).as_dict()
                res["scenario"] = scenario
                results.append(res)
                print(f"{scenario} {c}: {row_of(res)['verdict']} ({res['wall_s']:.0f} s)",
                      file=sys.stderr, flush=True)
                text = write(base, dict(meta, load_average=os.getloadavg()), results)
    print(text)
    print(f"wrote {base}.json, .md; logs in {log_dir}", file=sys.stderr)
    return 0 if all(row_of(r)["verdict"] == "ok" for r in results) else 1


def write(base: str, meta: dict, results: list) -> str:
    """faults.json and faults.md of the runs so far (rewritten after each run)."""
    rows = [row_of(r) for r in results]
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows, "runs": results}, f, indent=2, default=str)
        f.write("\n")
    text = markdown(meta, rows, results)
    with open(base + ".md", "w") as f:
        f.write(text)
    return text

if __name__ == "__main__":
    sys.exit(main())
