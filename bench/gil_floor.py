"""What CPython's GIL alone costs caller threads on this machine: the floor under
`scaling.py`'s caller-threads figures.

N threads share a fixed number of iterations of a loop that calls a C function holding the GIL
(dict.get), as a send() loop calls pyprod's compiled send(); no producer, no broker. The rate of
2 and 4 threads is given as a ratio to one thread, each run in its own process, the thread
counts interleaved over the rounds, medians reported. A producer's threads cannot beat this
ratio: whatever they lose below it is the producer's.

Two floors are measured, interleaved: with the machine's other cores idle, and with one of
them kept busy by a spinning process, as the Sender's thread and the broker keep it busy in a
producer's run (a thread that gives up the GIL must then wait for a core to get it back).

    python bench/gil_floor.py [--rounds 9] [--calls 30000000]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

THREADS = (1, 2, 4)
CONDITIONS = ("idle", "busy")
_SPIN = "print(flush=True)\nwhile True: pass"
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


@contextlib.contextmanager
def other_core(condition: str):
    """The machine's other cores idle, or one of them spinning in its own process."""
    spinner = (subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE)
               if condition == "busy" else None)
    try:
        if spinner is not None:
            spinner.stdout.readline()  # spinning from here on
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
            spinner.stdout.close()


def measure(rounds: int, calls: int) -> dict:
    rates = {c: {t: [] for t in THREADS} for c in CONDITIONS}
    for _ in range(rounds):
        for c in CONDITIONS:
            with other_core(c):
                for t in THREADS:
                    rates[c][t].append(run(calls, t))
    out = {"rounds": rounds, "calls": calls, "switch_interval_s": sys.getswitchinterval(),
           "conditions": {}}
    for c in CONDITIONS:
        med = {t: statistics.median(r) for t, r in rates[c].items()}
        out["conditions"][c] = {"rates": rates[c], "median": med,
                                "ratio": {t: med[t] / med[1] for t in THREADS}}
    return out


def markdown(r: dict) -> str:
    when = time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())
    lines = [f"# The GIL's floor for caller threads, {when}",
             "", f"Command: `python bench/gil_floor.py --rounds {r['rounds']} --calls "
             f"{r['calls']}` ({os.cpu_count()} cores, Python "
             f"{sys.version.split()[0]}, switch interval {r['switch_interval_s'] * 1000:g} ms).",
             "", "Other cores: *idle*, or one of them *busy* with a spinning process.", "",
             "| threads | idle: C calls/s, median (min..max) | of 1 thread "
             "| busy: C calls/s, median (min..max) | of 1 thread |",
             "|---:|---:|---:|---:|---:|"]
    for t in THREADS:
        cells = []
        for c in CONDITIONS:
            m = r["conditions"][c]
            rs = m["rates"][t]
            cells.append(f"{m['median'][t] / 1e6:.2f}M ({min(rs) / 1e6:.2f}M.."
                         f"{max(rs) / 1e6:.2f}M) | {m['ratio'][t]:.2f}x")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=30_000_000)
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
