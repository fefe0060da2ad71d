"""What the shape of confluent-kafka's timed loop costs it: the three loops below send the same
records to librdkafka's mock cluster (where the client is the bound), each run in its own
process, the shapes interleaved over the rounds, medians reported.

- ``chunked``: compare.py's loop since git 983fe71: produce() in try/except BufferError inline,
  poll(0) after every 1,000 records (bench/_clients._produce_loop).
- ``per-record-poll``: confluent-kafka's README and examples: produce() in try/except
  BufferError, then poll(0) after every record.
- ``wrapper``: compare.py's loop up to git 983fe71: each record through a Python function
  holding the retry loop, with ``enumerate`` to poll(0) every 1,000 records.

    python bench/loop_shapes.py [--rounds 5] [--records 4000000]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

SHAPES = ("chunked", "per-record-poll", "wrapper")
_CHILD = r"""
import itertools, json, resource, sys, time
sys.path.insert(0, sys.argv[4])
from _clients import _produce_loop, _value
from confluent_kafka import Producer

shape, n, bootstrap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
topic, value = "shapes", _value(100)
p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
              "enable.idempotence": False})
for i in range(6):
    p.produce(topic, value, partition=i)
p.flush(30)
produce, poll = p.produce, p.poll

def room(*args):
    while True:
        poll(0.001)
        try:
            return produce(*args)
        except BufferError:
            pass

def per_record_poll(count):
    for _ in range(count):
        try:
            produce(topic, value)
        except BufferError:
            room(topic, value)
        poll(0)

def wrapper(count):
    def put(k, **kw):
        while True:
            try:
                produce(topic, value, k, **kw)
                return
            except BufferError:
                poll(0.001)
    for i, k in enumerate(itertools.repeat(None, count)):
        put(k)
        if i % 1000 == 0:
            poll(0)

loop = {"chunked": _produce_loop(produce, poll, room, topic, value, None),
        "per-record-poll": per_record_poll, "wrapper": wrapper}[shape]
ru = resource.getrusage(resource.RUSAGE_SELF)
c0, t0 = ru.ru_utime + ru.ru_stime, time.perf_counter()
loop(n)
left = p.flush(300)
t1, ru = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
assert not left, left
print(json.dumps({"wall_s": t1 - t0, "cpu_s": ru.ru_utime + ru.ru_stime - c0}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "loop_shapes"))
    args = ap.parse_args(argv)
    import _mock_broker
    from _runs import machine_cpu_s
    from _tables import machine_info
    runs = []
    with _mock_broker.MockBroker() as broker:
        broker.create("shapes")
        for rnd in range(args.rounds):
            for shape in SHAPES[rnd % 3:] + SHAPES[:rnd % 3]:
                busy0, t0 = machine_cpu_s(), time.monotonic()
                out = subprocess.run([sys.executable, "-c", _CHILD, shape, str(args.records),
                                      broker.bootstrap, HERE], capture_output=True, text=True)
                if out.returncode:
                    raise RuntimeError(f"{shape}: {out.stderr[-2000:]}")
                res = json.loads(out.stdout.strip().splitlines()[-1])
                busy = machine_cpu_s()[0] - busy0[0]
                res.update(shape=shape, round=rnd, machine_cores=busy / (time.monotonic() - t0))
                runs.append(res)
                print(f"round {rnd + 1}: {shape:>16} {args.records / res['wall_s']:>12,.0f} "
                      f"records/s, {res['cpu_s'] / args.records * 1e6:.2f} CPU s/M, machine "
                      f"{res['machine_cores']:.2f} cores busy", file=sys.stderr, flush=True)
    lines = [f"# confluent-kafka's loop shapes, {time.strftime('%Y-%m-%d')}", "",
             f"Command: `python bench/loop_shapes.py --rounds {args.rounds} --records "
             f"{args.records}`. Machine: {machine_info()['cpu_model']}, {os.cpu_count()} cores. "
             "librdkafka's mock cluster, 6 partitions, 100-byte values, acks=1, linger.ms=5. "
             "Medians over the rounds.", "",
             "| shape | records/s | CPU s / M records | vs chunked: records/s, CPU |",
             "|---|---:|---:|---:|"]
    med = {s: (statistics.median(args.records / r["wall_s"] for r in runs if r["shape"] == s),
               statistics.median(r["cpu_s"] / args.records * 1e6 for r in runs
                                 if r["shape"] == s)) for s in SHAPES}
    for s in SHAPES:
        lines.append(f"| {s} | {med[s][0]:,.0f} | {med[s][1]:.2f} | "
                     f"{med[s][0] / med['chunked'][0]:.2f}x, {med[s][1] / med['chunked'][1]:.2f}x |")
    with open(args.out + ".json", "w") as f:
        json.dump({"command": " ".join(sys.argv), "runs": runs}, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
