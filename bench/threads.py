"""send() from 1, 2 and 4 threads sharing one pyprod KafkaProducer (and produce() sharing one
confluent-kafka Producer: its own N-thread ratio in the same runs), on librdkafka's mock
cluster (it stores batches without decoding them: the client is the bound): records/s, the
ratio to one thread and CPU per record, on a GIL build or a free-threaded one (CPython 3.14t;
there the GIL stays off only if every extension imported declares it may, or PYTHON_GIL=0: the
table says whether it was on in the runs, as sys._is_gil_enabled() said in each).

100-byte keyless values (each thread its own value object), 6 partitions, acks=1, linger_ms=5,
buffer_memory 4 MiB; by default each run sends enough records that buffer_memory holds under 5%
of the bytes sent (steady state), and at least 2M (a second or more at full rate), split evenly
over the threads, which a Barrier starts together. Each run is its own process; thread counts
interleaved, their order rotated, medians over rounds. CPU is the
process's (getrusage: every thread's, the Sender's too) over the timed sends and the flush.
Every run's landed count is checked (end offsets).

    python bench/threads.py                               # 5 rounds, steady state
    python bench/threads.py --rounds 1 --records 100000   # a smoke run (not steady state)
    PYTHON_GIL=0 ~/.cache/pyprod/venv-3.14t/bin/python bench/threads.py  # free-threaded

Writes bench/results/threads.json and .md (threads_ft.* on a free-threaded build; --name).
Needs confluent-kafka (the mock cluster; it has cp314t wheels), nothing else beyond pyprod.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import sys
import sysconfig
import threading
import time

import _clients
import _mock_broker
import before_after
from _workloads import OVERHEAD, STEADY_SHARE
import compare
from _runs import run_child

THREADS = (1, 2, 4)
VALUE_SIZE = 100
BUFFER_MEMORY = 4 * 1024 * 1024
MIN_RECORDS = 2_000_000
FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def gil_enabled() -> bool:
    return getattr(sys, "_is_gil_enabled", lambda: True)()


def steady_records(buffer_memory: int) -> int:
    return int(buffer_memory / STEADY_SHARE / (VALUE_SIZE + OVERHEAD)) + 1


# ---------------------------------------------------------------------------------------------
# the child: one producer, `threads` threads, one JSON line

def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _pyprod(bootstrap, topic, buffer_memory):
    """(the loop of one thread, flush, close) on a warmed pyprod producer."""
    from pyprod import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=_mock_broker.API_VERSION,
                      acks=1, linger_ms=compare.LINGER_MS, buffer_memory=buffer_memory)
    for f in [p.send(topic, b"warm", partition=i) for i in range(compare.PARTITIONS)]:
        f.get(30)  # metadata, the connection, every partition's leader answering
    send = p.send

    def loop(count):
        value = _own_value()
        for _ in range(count):
            send(topic, value)
    return loop, p.flush, p.close


def _own_value():
    """The calling thread's own value object (compare._value makes a new one each call): a
    program's records are its own objects. One bytes object shared by every thread would
    measure CPython's reference counting of it (an atomic write from each thread per call, on a
    free-threaded build), not the producer."""
    return compare._value(VALUE_SIZE)


def _confluent(bootstrap, topic, buffer_memory):
    """The same for confluent-kafka, its loop shaped as in compare.py (bench/_clients.py:
    produce() in try/except BufferError, poll(0) every CHUNK records), its default queue."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": compare.LINGER_MS})
    for i in range(compare.PARTITIONS):
        p.produce(topic, b"warm", partition=i)
    if p.flush(30):
        raise RuntimeError("confluent-kafka: warm-up records not delivered")
    produce, poll = p.produce, p.poll
    room = _clients.confluent_room(produce, poll)

    def flush():
        if p.flush(300):
            raise RuntimeError("confluent-kafka: records not delivered after flush")

    def loop(count):  # each thread its own value, as pyprod's
        _clients._produce_loop(produce, poll, room, topic, _own_value(), None)(count)
    return (loop,
            flush, lambda: None)


def child(bootstrap: str, topic: str, records: int, threads: int, buffer_memory: int,
          client: str = "pyprod") -> dict:
    send_loop, flush, close = (_confluent if client == "confluent-kafka" else _pyprod)(
        bootstrap, topic, buffer_memory)
    gate, errors = threading.Barrier(threads + 1), []

    def loop(count):
        gate.wait()
        try:
            send_loop(count)
        except BaseException as e:  # noqa: BLE001 - reported
            errors.append(repr(e))

    ts = [threading.Thread(target=loop, args=(n,)) for n in compare._split(records, threads)]
    for t in ts:
        t.start()
    c0, t0 = _cpu(), time.perf_counter()
    gate.wait()
    for t in ts:
        t.join()
    flush()
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    gil = gil_enabled()
    close()
    if errors:
        raise RuntimeError(f"{client}: send raised in {len(errors)} threads: {errors[:3]}")
    return {"client": client, "threads": threads, "records": records, "wall_s": wall,
            "cpu_s": cpu, "gil_enabled": gil}


# ---------------------------------------------------------------------------------------------
# the parent

def run_one(broker, spec: dict) -> dict:
    client = spec.get("client", "pyprod")
    what = f"{client}, {spec['threads']} threads"
    gil = spec.get("python_gil")  # free-threaded builds: this run's PYTHON_GIL
    topic = f"threads-{client}-{spec['threads']}t-{spec['round']}-g{gil}-{os.getpid()}"
    broker.create(topic, compare.PARTITIONS)
    args = dict(bootstrap=broker.bootstrap, topic=topic, records=spec["records"],
                threads=spec["threads"], buffer_memory=spec["buffer_memory"], client=client)
    env = None if gil is None else {"PYTHON_GIL": gil}
    res = dict(run_child(os.path.abspath(__file__), args, what, spec["records"], env),
               round=spec["round"])
    landed = broker.count(topic)
    if landed != spec["records"] + compare.PARTITIONS:
        raise RuntimeError(f"{what}: {landed} records in {topic}, expected "
                           f"{spec['records'] + compare.PARTITIONS}")
    return res


def summarize(runs: list) -> list:
    """One row per client and thread count: medians over rounds, the ratio to the client's one
    thread's median."""
    rows = []
    for client in dict.fromkeys(r.get("client", "pyprod") for r in runs):
        mine = [r for r in runs if r.get("client", "pyprod") == client]
        for gil in sorted({r["gil_enabled"] for r in mine}, reverse=True):
            rows += _client_rows(client, [r for r in mine if r["gil_enabled"] == gil])
    return rows


def _client_rows(client: str, runs: list) -> list:
    rows = []
    for n in sorted({r["threads"] for r in runs}):
        rs = [r for r in runs if r["threads"] == n]
        rates = [r["records"] / r["wall_s"] for r in rs]
        rows.append({"client": client, "threads": n, "rounds": len(rs),
                     "records": rs[0]["records"],
                     "records_per_s": statistics.median(rates),
                     "min_records_per_s": min(rates), "max_records_per_s": max(rates),
                     "cpu_s_per_m": statistics.median(r["cpu_s"] / r["records"] * 1e6
                                                      for r in rs),
                     "cores_busy": statistics.median(r["cpu_s"] / r["wall_s"] for r in rs),
                     "gil_enabled": sorted({r["gil_enabled"] for r in rs})})
    one = next((r["records_per_s"] for r in rows if r["threads"] == 1), None)
    for row in rows:
        row["ratio_to_1"] = row["records_per_s"] / one if one else None
    return rows


def _gil_words(values) -> str:
    return "/".join("on" if v else "off" for v in values)


def markdown(meta: dict, rows: list) -> str:
    m = meta["machine"]
    build = "free-threaded" if meta["free_threaded_build"] else "GIL"
    lines = [f"# send() from several threads on one producer, {meta['date']}", "",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['os']}, Python "
             f"{m['python']} ({build} build, PYTHON_GIL={meta['python_gil'] or 'unset'}).",
             "Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
             f"Command: `{meta['command']}`.", "",
             f"GIL enabled in the runs (sys._is_gil_enabled()): "
             f"{_gil_words(sorted({g for r in rows for g in r['gil_enabled']}))}.", "",
             f"{VALUE_SIZE}-byte keyless values, {compare.PARTITIONS} partitions, acks=1, "
             f"linger_ms={compare.LINGER_MS}, buffer_memory "
             f"{meta['buffer_memory'] / 1024 / 1024:g} MiB (pyprod); one producer shared by the "
             f"threads; {meta['records']:,} records per run"
             + (" (buffer_memory under 5% of a run's bytes: steady state)"
                if meta["steady_state"] else " (a short run: not steady state)")
             + f". Medians of {meta['rounds']} interleaved rounds, each run in its own process.",
             "",
             "| client | threads | records/s (min..max) | vs 1 thread | CPU s / M records "
             "| CPU / wall | GIL |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ratio = "—" if r["ratio_to_1"] is None else f"{r['ratio_to_1']:.2f}x"
        lines.append(f"| {r.get('client', 'pyprod')} | {r['threads']} | "
                     f"{r['records_per_s']:,.0f} "
                     f"({r['min_records_per_s']:,.0f}..{r['max_records_per_s']:,.0f}) | "
                     f"{ratio} | {r['cpu_s_per_m']:.2f} | {r['cores_busy']:.2f} | "
                     f"{_gil_words(r['gil_enabled'])} |")
    for client in dict.fromkeys(r.get("client", "pyprod") for r in rows):
        one = {r["gil_enabled"][0]: r for r in rows if r.get("client", "pyprod") == client
               and r["threads"] == 1 and len(r["gil_enabled"]) == 1}
        if True in one and False in one:
            lines += ["", f"{client}, one thread: CPU per record with the GIL off is "
                      f"{one[False]['cpu_s_per_m'] / one[True]['cpu_s_per_m']:.2f}x that with "
                      f"it on (records/s {one[False]['records_per_s'] / one[True]['records_per_s']:.2f}x)."]
    lines += ["", "CPU s / M records: the producer process's CPU (all its threads) per million "
              "records. CPU / wall: how many cores it kept busy. The mock cluster runs in its "
              "own process on the same machine. confluent-kafka's loop: produce() in try/except "
              "BufferError and poll(0) every 1,000 records, as in compare.py; its default "
              "queue (100,000 messages)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default=",".join(map(str, THREADS)))
    ap.add_argument("--records", type=int, default=None,
                    help="records per run (default: buffer_memory under 5%% of a run, "
                         f"at least {MIN_RECORDS:,})")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--buffer-memory", type=int, default=BUFFER_MEMORY)
    ap.add_argument("--clients", default="pyprod,confluent-kafka",
                    help="pyprod and/or confluent-kafka (its N-thread ratio, same runs)")
    ap.add_argument("--gil", default=None,
                    help="free-threaded builds: PYTHON_GIL for the runs, e.g. 0,1 (each mode "
                         "a row, interleaved in every round; default: this process's)")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    ap.add_argument("--name", default="threads_ft" if FREE_THREADED_BUILD else "threads")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(**json.loads(args.child))), flush=True)
        return 0
    try:
        counts = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        ap.error("--threads: a comma-separated list of positive counts, e.g. 1,2,4")
    clients = [c for c in args.clients.split(",") if c]
    if not clients or set(clients) - {"pyprod", "confluent-kafka"}:
        ap.error("--clients: pyprod and/or confluent-kafka")
    gils = [g for g in (args.gil or "").split(",") if g] or [None]
    if args.gil is not None and (not FREE_THREADED_BUILD or set(gils) - {"0", "1"}):
        ap.error("--gil: 0 and/or 1, on a free-threaded build")
    if args.rounds <= 0 or (args.records is not None and args.records <= 0) \
            or args.buffer_memory <= 0:
        ap.error("--rounds, --records and --buffer-memory must be positive")
    steady = steady_records(args.buffer_memory)
    records = args.records or max(steady, MIN_RECORDS)
    t0, runs = time.monotonic(), []
    with _mock_broker.MockBroker() as broker:
        for rnd in range(args.rounds):
            for n, client, gil in compare._rotate(
                    [(n, c, g) for n in counts for c in clients for g in gils], rnd):
                spec = {"threads": n, "records": records, "round": rnd,
                        "buffer_memory": args.buffer_memory, "client": client,
                        "python_gil": gil}
                runs.append(run_one(broker, spec))
                r = runs[-1]
                print(f"round {rnd + 1}/{args.rounds} {client} {n} threads: "
                      f"{r['records'] / r['wall_s']:,.0f} records/s, "
                      f"{r['cpu_s'] / r['records'] * 1e6:.2f} CPU s/M, "
                      f"sys._is_gil_enabled() {r['gil_enabled']}", file=sys.stderr, flush=True)
    versions = compare.versions(tuple(c for c in clients if c != "pyprod"))
    versions.pop("kafka_broker", None)  # no Apache Kafka here
    versions["mock"] = _mock_broker.version()
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.executable), "bench/threads.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": versions,
            "python_version": sys.version, "free_threaded_build": FREE_THREADED_BUILD,
            "python_gil": os.environ.get("PYTHON_GIL"), "rounds": args.rounds,
            "records": records, "buffer_memory": args.buffer_memory,
            "steady_state": records >= steady, "elapsed_s": round(time.monotonic() - t0, 1)}
    rows = summarize(runs)
    before_after.write(os.path.join(args.out_dir, args.name),
                       {"meta": meta, "rows": rows, "runs": runs}, markdown(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
