"""What CPython's GIL alone costs caller threads on this machine: the floor under
`scaling.py`'s caller-threads figures.

N threads share a fixed number of iterations of a loop that calls a C function holding the GIL
(dict.get), as a send() loop calls pyprod's compiled send(); no producer, no broker. The rate of
2 and 4 threads is given as a ratio to one thread, each run in its own process, the thread
counts interleaved over the rounds, medians reported. A producer's threads cannot beat this
ratio: whatever they lose below it is the producer's.

    python bench/gil_floor.py [--rounds 5] [--calls 6000000]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

THREADS = (1, 2, 4)
_CHILD = """
import sys, threading, time
calls, threads = int(sys.argv[1]), int(sys.argv[2])
def work(n):
    get = {}.get
    for i in range(n):
        get(i)
ts = [threading.Thread(target=work, args=(calls // threads,)) for _ in range(threads)]
t0 = time.perf_counter()
for t in ts:
    t.start()
for t in ts:
    t.join()
print(calls / (time.perf_counter() - t0))
"""


def run(calls: int, threads: int) -> float:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(calls), str(threads)],
                         check=True, capture_output=True, text=True)
    return float(out.stdout)


def measure(rounds: int, calls: int) -> dict:
    rates = {t: [] for t in THREADS}
    for _ in range(rounds):
        for t in THREADS:
            rates[t].append(run(calls, t))
    med = {t: statistics.median(r) for t, r in rates.items()}
    return {"rounds": rounds, "calls": calls, "rates": rates, "median": med,
            "ratio": {t: med[t] / med[1] for t in THREADS},
            "switch_interval_s": sys.getswitchinterval()}


def markdown(r: dict) -> str:
    lines = [f"# The GIL's floor for caller threads, {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}",
             "", f"Command: `python bench/gil_floor.py --rounds {r['rounds']} --calls "
             f"{r['calls']}` ({os.cpu_count()} cores, Python "
             f"{sys.version.split()[0]}, switch interval {r['switch_interval_s'] * 1000:g} ms).",
             "", "| threads | C calls/s, median (min..max) | of 1 thread |", "|---:|---:|---:|"]
    for t in THREADS:
        rs = r["rates"][t]
        lines.append(f"| {t} | {r['median'][t] / 1e6:.2f}M ({min(rs) / 1e6:.2f}M.."
                     f"{max(rs) / 1e6:.2f}M) | {r['ratio'][t]:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=6_000_000)
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args(argv)
    r = measure(args.rounds, args.calls)
    text = markdown(r)
    print(text)
    with open(os.path.join(args.out_dir, "gil_floor.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out_dir, "gil_floor.json"), "w") as f:
        json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
