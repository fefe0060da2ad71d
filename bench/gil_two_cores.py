"""Do the caller thread and the Sender both make progress, on two cores?

One caller thread runs a send() loop (100-byte values, keyless, acks=1, linger_ms=5, 6
partitions) against a local Apache Kafka broker. Over the loop it measures:

- wall time and process CPU time: CPU / wall > 1 means more than one core was busy;
- the caller thread's CPU (time.thread_time) and the CPU of each thread the producer started
  (the Sender; clock_gettime on the thread's CPU clock, or /proc/self/task/<tid>/stat);
- how many records were already acknowledged when the loop ended, i.e. the Sender's
  progress while the caller was still sending.

    python bench/gil_two_cores.py [--records 1000000] [--bootstrap-servers HOST:PORT]

Prints a per-interval table and a summary; --json writes the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import pyprod  # noqa: F401
except ImportError:  # source checkout without an install
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tasks() -> set[int]:
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _task_name(tid: int) -> str:
    for t in threading.enumerate():
        if getattr(t, "native_id", None) == tid:
            return t.name
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return str(tid)


def _thread_clock(tid: int):
    """A function returning thread ``tid``'s CPU seconds."""
    for t in threading.enumerate():
        if getattr(t, "native_id", None) == tid and hasattr(time, "pthread_getcpuclockid"):
            clk = time.pthread_getcpuclockid(t.ident)
            return lambda: time.clock_gettime(clk)

    def from_proc():  # not a Python thread (or no pthread clock): clock ticks from procfs
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except (OSError, IndexError, ValueError):
            return float("nan")
    return from_proc


def measure(bootstrap: str, topic: str, n: int, value_size: int = 100, step: int = 0) -> dict:
    from pyprod import KafkaProducer

    before = _tasks()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    try:
        producer.send(topic, b"w" * value_size).get(30)  # warm: metadata, connection
        threads = {tid: (_task_name(tid), _thread_clock(tid)) for tid in sorted(_tasks() - before)}
        value = os.urandom(value_size)
        step = step or max(1, n // 10)
        send = producer.send
        samples = []
        probes = []  # every 1000th future: how far the Sender got while the caller still sent

        def sample(sent):
            samples.append({"sent": sent, "wall": time.perf_counter(), "cpu": time.process_time(),
                            "caller": time.thread_time(),
                            "threads": {tid: clk() for tid, (_, clk) in threads.items()}})

        sample(0)
        i = 0
        while i < n:
            for _ in range(min(step, n - i)):
                f = send(topic, value)
                if i % 1000 == 0:
                    probes.append(f)
                i += 1
            sample(i)
        acked_in_loop = sum(1 for f in probes if f.is_done) * 1000
        producer.flush()
        sample(n)
    finally:
        producer.close()

    s0, s_loop, s_end = samples[0], samples[-2], samples[-1]

    def span(a, b):
        wall = b["wall"] - a["wall"]
        thr = {tid: b["threads"][tid] - a["threads"][tid] for tid in threads}
        return {"wall_s": wall, "process_cpu_s": b["cpu"] - a["cpu"],
                "caller_cpu_s": b["caller"] - a["caller"],
                "thread_cpu_s": {f"{threads[t][0]} ({t})": v for t, v in thr.items()},
                "cores_busy": (b["cpu"] - a["cpu"]) / wall if wall > 0 else 0.0}

    return {
        "records": n, "value_bytes": value_size,
        "send_loop": span(s0, s_loop), "flush": span(s_loop, s_end), "total": span(s0, s_end),
        "records_per_s": n / (s_end["wall"] - s0["wall"]),
        "acked_before_loop_end": min(acked_in_loop, n),
        "intervals": [dict(sent=b["sent"], **span(a, b)) for a, b in zip(samples, samples[1:])],
    }


def report(r: dict) -> str:
    names = list(r["total"]["thread_cpu_s"])
    head = "| interval | wall s | process CPU s | CPU/wall | caller CPU s | " + \
        " | ".join(f"{n} CPU s" for n in names) + " |"
    lines = [head, "|" + "---|" * (5 + len(names))]
    sends = r["intervals"][:-1]  # the last interval is the flush
    starts = [0] + [iv["sent"] for iv in sends[:-1]]
    rows = [(f"send {a:,}..{iv['sent']:,}", iv) for a, iv in zip(starts, sends)]
    rows.append(("flush", r["flush"]))
    rows.append(("send loop", r["send_loop"]))
    rows.append(("total", r["total"]))
    for label, iv in rows:
        thr = " | ".join(f"{iv['thread_cpu_s'][n]:.3f}" for n in names)
        lines.append(f"| {label} | {iv['wall_s']:.3f} | {iv['process_cpu_s']:.3f} | "
                     f"{iv['cores_busy']:.2f} | {iv['caller_cpu_s']:.3f} | {thr} |")
    loop = r["send_loop"]
    sender = sum(loop["thread_cpu_s"].values())
    lines += [
        "",
        f"{r['records']:,} records in {r['total']['wall_s']:.2f}s = {r['records_per_s']:,.0f} "
        f"records/s (send loop {loop['wall_s']:.2f}s, flush {r['flush']['wall_s']:.2f}s).",
        f"During the send loop: process CPU {loop['process_cpu_s']:.2f}s over "
        f"{loop['wall_s']:.2f}s wall = {loop['cores_busy']:.2f} cores busy; caller thread "
        f"{loop['caller_cpu_s']:.2f}s CPU ({loop['caller_cpu_s'] / loop['wall_s']:.0%} of wall), "
        f"producer threads {sender:.2f}s CPU ({sender / loop['wall_s']:.0%} of wall); "
        f"~{r['acked_before_loop_end']:,} of {r['records']:,} records were acknowledged "
        "before the loop ended.",
        "Two cores in parallel means CPU/wall > 1 and caller + Sender CPU > wall; a Sender "
        "that only ran while the caller waited for the GIL would give CPU/wall <= 1.",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if args.records <= 0:
        ap.error("--records must be positive")
    cluster = None
    topic = f"gil-two-cores-{os.getpid()}"
    try:
        if args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
            from confluent_kafka.admin import AdminClient, NewTopic
            AdminClient({"bootstrap.servers": bootstrap}).create_topics(
                [NewTopic(topic, 6, 1)])[topic].result(30)
            time.sleep(1.0)
        else:
            from pyprod.testing import KafkaCluster
            print("starting a 1-node Kafka broker ...", file=sys.stderr, flush=True)
            cluster = KafkaCluster(nodes=1).start()
            bootstrap = cluster.bootstrap_servers
            cluster.create_topic(topic, 6)
        result = measure(bootstrap, topic, args.records)
    finally:
        if cluster is not None:
            cluster.stop()
    result["cpu_count"] = os.cpu_count()
    print(report(result))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
