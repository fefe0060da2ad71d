"""The aiokafka workload through pyprod.aio, aiokafka and confluent-kafka's AIOProducer: same
broker, same run, steady state.

compare.py's aiokafka runner (``await send()`` per record, futures gathered a 10,000-record
window behind, flush) runs as is for aiokafka and, with ``aiokafka.AIOKafkaProducer`` swapped
for ``pyprod.aio.AIOKafkaProducer`` in the child, for pyprod.aio; confluent-kafka's
``confluent_kafka.aio.AIOProducer`` runs the same loop (``await produce()``). 100-byte keyless
values, 6 partitions, acks=1, linger_ms=5; one broker node, its data on a tmpfs, each run's topic
deleted; each run is its own process (compare.py's children
and measurements: wall time from the first send to flush, the child's CPU), clients
interleaved with the order rotated, medians over rounds, every record counted on the broker.

    python bench/aio.py                       # 3 rounds, 1,000,000 records per run
    python bench/aio.py --rounds 1 --records 100000 --bootstrap 127.0.0.1:9092
    python bench/aio.py --broker mock --clients pyprod.aio,pyprod.aio-mif1,aiokafka --out x.json

``--broker mock``: librdkafka's mock cluster (the clients' own cost). ``pyprod.aio-mif1`` is
pyprod.aio as before issue 44 part 3 (max_in_flight_requests_per_connection=1 without
idempotence), for a before/after in the same run. Each run also gives ``others``: the machine's
busy CPU meanwhile less the client's and the broker's, per second of the run (a shared machine).

Writes bench/results/aio.json (or --out).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

import _mock_broker
from _runs import MachineLoad
import compare

CLIENTS = ("pyprod.aio", "aiokafka", "confluent-kafka-aio")
MORE = ("pyprod.aio-mif1",)  # by --clients only
WORKLOAD = "100B"


def _run_pyprod_aio(spec):
    import aiokafka

    import pyprod.aio
    aiokafka.AIOKafkaProducer = pyprod.aio.AIOKafkaProducer  # compare's runner imports it
    return compare._run_aiokafka(spec)


def _run_pyprod_aio_mif1(spec):
    from pyprod.aio import config

    make = config.producer_config

    def before(c, *args):  # the 1 request in flight pyprod.aio asked for without idempotence
        out = make(c, *args)
        if not c["enable_idempotence"]:
            out["max_in_flight_requests_per_connection"] = 1
        return out
    config.producer_config = before
    return _run_pyprod_aio(spec)


def _run_confluent_aio(spec):
    from confluent_kafka.aio import AIOProducer

    async def run():
        p = AIOProducer({"bootstrap.servers": spec["bootstrap"], "acks": spec["acks"],
                         "linger.ms": spec["linger_ms"], "enable.idempotence": False})
        try:
            topic, value, n = spec["topic"], compare._value(spec["value_size"]), spec["records"]
            await asyncio.gather(*[await p.produce(topic, value, partition=i)
                                   for i in range(spec["partitions"])])
            c0, t0 = compare._cpu(), time.perf_counter()
            futs, older = [], []
            for _ in range(n):
                futs.append(await p.produce(topic, value))
                if len(futs) == 10_000:
                    await asyncio.gather(*older)
                    older, futs = futs, []
            await p.flush()
            await asyncio.gather(*(futs + older))
            return time.perf_counter() - t0, compare._cpu() - c0, {}
        finally:
            await p.close()
    return asyncio.run(run())


RUNNERS = {"pyprod.aio": _run_pyprod_aio, "pyprod.aio-mif1": _run_pyprod_aio_mif1,
           "aiokafka": compare._run_aiokafka,
           "confluent-kafka-aio": _run_confluent_aio}


def child(spec) -> int:
    wall, cpu, _ = RUNNERS[spec["client"]](spec)
    print(json.dumps({"wall_s": wall, "cpu_s": cpu}), flush=True)
    return 0


def run_once(broker, client, records, timeout):
    topic = f"aio-{client}-{os.urandom(4).hex()}"
    spec = dict(compare.workload_spec(WORKLOAD), client=client, records=records, rate=0,
                bootstrap=broker.bootstrap, topic=topic, partitions=compare.PARTITIONS)
    broker.create(topic)
    load = MachineLoad(broker)
    out = compare.run_measured([sys.executable, os.path.abspath(__file__), "--child",
                                json.dumps(spec)], timeout)
    load = load.result(out["cpu_s"])  # CPU s per s that neither the client nor the broker took
    others = round(max(0.0, load["other_cpu_s"]) / load["run_s"], 2) if load.get("run_s") \
        else None
    line = [s for s in out["stdout"].splitlines() if s.startswith("{")]
    landed = broker.count(topic)
    broker.delete(topic)
    if out["rc"] != 0 or not line:
        raise RuntimeError(f"{client} failed (exit {out['rc']}):\n{out['stderr'][-3000:]}")
    if landed != records + compare.PARTITIONS:
        raise RuntimeError(f"{client}: {landed} records landed, expected "
                           f"{records + compare.PARTITIONS}")
    res = json.loads(line[-1])
    return {"client": client, "records_per_s": records / res["wall_s"],
            "cpu_s_per_million": res["cpu_s"] / records * 1e6, "peak_rss_mb": out["peak_rss_mb"],
            "others": others}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--bootstrap", help="an existing broker (default: start one)")
    ap.add_argument("--broker", choices=("kafka", "mock"), default="kafka")
    ap.add_argument("--out", default="aio.json", help="file name in bench/results")
    args = ap.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    clients = args.clients.split(",")
    runs = []
    mock = args.broker == "mock"
    if mock and args.bootstrap:
        ap.error("--broker mock starts its own mock cluster")
    if not mock:
        compare.broker_data_on_tmpfs()
    with (_mock_broker.MockBroker() if mock else compare.Broker(args.bootstrap)) as broker:
        for r in range(args.rounds):
            for client in clients[r % len(clients):] + clients[:r % len(clients)]:
                runs.append(dict(run_once(broker, client, args.records,
                                          120 + args.records / 5_000), round=r))
                print(json.dumps(runs[-1]), flush=True)
    summary = {c: {k: statistics.median(x[k] for x in runs if x["client"] == c)
                   for k in ("records_per_s", "cpu_s_per_million", "peak_rss_mb")}
               for c in clients}
    for c, s in summary.items():
        print(f"{c:22} {s['records_per_s']:>12,.0f} records/s  "
              f"{s['cpu_s_per_million']:6.2f} CPU s per 1M  {s['peak_rss_mb']:6.0f} MiB")
    os.makedirs(compare.RESULTS, exist_ok=True)
    with open(os.path.join(compare.RESULTS, args.out), "w") as f:
        json.dump({"workload": WORKLOAD, "records": args.records, "runs": runs,
                   "broker": _mock_broker.LABEL if mock else "Apache Kafka (1 node)",
                   "summary": summary, "machine": compare.machine_info(),
                   "date": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
