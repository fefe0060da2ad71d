"""Where a large record's CPU goes, against the floors of its bytes: memcpy, CRC32C, the kernel.

Each client sends 1 KiB values (compare.py's 1KiB workload: keyless, 6 partitions, acks=1,
linger_ms=5) to librdkafka's mock cluster under ``perf record`` (cpu-clock), twice: a small and
a large run. The difference of each part's CPU time, divided by the extra records, is its
steady-state cost per record (start-up, imports and connections fall out), split by thread
(the caller; the client's other threads) and by part:

- copy into the batch: libc's memcpy/memmove;
- CRC32C: kcore's crc module (pyprod), librdkafka's crc32c (confluent-kafka);
- kernel, copy to the socket: the kernel's copy from the user's buffers;
- kernel, the rest: the system calls, TCP on the loopback, scheduling;
- clock: the vDSO's clock_gettime;
- Python: the interpreter (the caller's loop, the calls, objects);
- the client's own code: everything else (kcore's modules, librdkafka).

The floors are measured in the same run, per KiB: memcpy of an L2-sized buffer, kcore's
CRC32C over the same buffer, and a loopback TCP connection's writer sending 1 MiB writes
to a reader process (the writer's own CPU: what the kernel charges a sender per byte).

    python bench/byte_costs.py [--clients pyprod,confluent-kafka] [--records 2500000]

Needs ``perf`` (linux-tools) and permission to profile (kernel.perf_event_paranoid <= 2).
Writes bench/results/byte_costs.md and .json.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _mock_broker  # noqa: E402
import before_after  # noqa: E402
import compare  # noqa: E402
from _workloads import PARTITIONS, workload_spec  # noqa: E402

PARTS = ("copy into the batch", "CRC32C", "kernel, copy to the socket", "kernel, the rest",
         "clock", "Python", "the client's own code")
_KERNEL_COPY = re.compile(r"copy_from_iter|copy_user|rep_movs|copy_from_user|memcpy")


def part_of(dso: str, sym: str) -> str:
    """The part a perf sample's dso and symbol belong to."""
    if dso == "[kernel.kallsyms]":
        return "kernel, copy to the socket" if _KERNEL_COPY.search(sym) else "kernel, the rest"
    if dso == "[vdso]":
        return "clock"
    if "crc32c" in sym.lower() or dso.startswith("crc."):
        return "CRC32C"
    if dso.startswith("libc.") and re.search(r"mem(move|cpy)", sym):
        return "copy into the batch"
    if dso.startswith(("libpython", "python")):
        return "Python"
    return "the client's own code"


def perf_parts(data: str) -> dict:
    """{(thread, part): CPU ns} from a perf.data file of one process; thread is "caller" (the
    process's main thread, whose tid is its pid: the lowest) or "other"."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-q",
                          "-s", "pid,dso,sym", "-F", "period,pid,dso,sym", "-t", "\t"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) >= 4 and cols[0].isdigit() and ":" in cols[1]:
            rows.append((int(cols[0]), int(cols[1].split(":")[0]), cols[2], cols[3]))
    main = min(tid for _, tid, _, _ in rows)
    parts = {}
    for period, tid, dso, sym in rows:
        key = ("caller" if tid == main else "other", part_of(dso, sym))
        parts[key] = parts.get(key, 0) + period
    return parts


def profile(broker, client: str, records: int) -> dict:
    """One run of client under perf: its parts' CPU ns and the child's own result."""
    spec = dict(workload_spec("1KiB"), client=client, records=records, rate=None)
    bootstrap, security = broker.client_address(spec)
    topic = f"bytes-{client}-{uuid.uuid4().hex[:8]}"
    broker.create(topic, PARTITIONS)
    spec.update(bootstrap=bootstrap, security_config=security, partitions=PARTITIONS,
                threads=1, topic=topic)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        run = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-o", data,
                              "--", sys.executable, compare.__file__, "--child",
                              json.dumps(spec)], capture_output=True, text=True)
        line = [s for s in run.stdout.splitlines() if s.startswith("{")]
        if run.returncode != 0 or not line:
            raise RuntimeError(f"{client}: {run.stderr[-2000:]}")
        return {"parts": perf_parts(data), "result": json.loads(line[-1])}


def per_record(small: dict, large: dict, extra: int) -> dict:
    """Each (thread, part)'s steady-state ns per record: large minus small, per extra record."""
    keys = set(small["parts"]) | set(large["parts"])
    return {f"{t}/{p}": (large["parts"].get((t, p), 0) - small["parts"].get((t, p), 0)) / extra
            for t, p in sorted(keys)}


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def floors(size: int = 256 * 1024, total: int = 1 << 30) -> dict:
    """ns per KiB: memcpy and kcore's CRC32C over a size-byte buffer, and a loopback TCP
    writer's CPU per byte sent in 1 MiB writes."""
    from kcore.crc import crc32c
    src, dst = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
    n = total // size
    t = time.perf_counter()
    for _ in range(n):
        ctypes.memmove(dst, src, size)
    memcpy = (time.perf_counter() - t) / (n * size / 1024) * 1e9
    buf = bytes(size)
    t = time.perf_counter()
    for _ in range(n):
        crc32c(buf)
    crc = (time.perf_counter() - t) / (n * size / 1024) * 1e9
    return {"memcpy": memcpy, "crc32c": crc, "kernel_send": _kernel_send(total)}


def _kernel_send(total: int) -> float:
    """The writer's CPU ns per KiB sent over loopback TCP to a reader process."""
    listener = socket.create_server(("127.0.0.1", 0))
    reader = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
        "b = bytearray(1 << 20)\n"
        "while s.recv_into(b):\n"
        "    pass\n"), str(listener.getsockname()[1])])
    conn, _ = listener.accept()
    chunk = bytes(1 << 20)
    c0 = _cpu()
    for _ in range(total // len(chunk)):
        conn.sendall(chunk)
    cpu = _cpu() - c0
    conn.close()
    listener.close()
    reader.wait(timeout=60)
    return cpu / (total / 1024) * 1e9


def markdown(meta: dict, rows: dict, floor: dict, value_size: int) -> str:
    kib = (value_size + 100) / 1024  # a record's bytes in its batch, about
    clients = list(rows)
    lines = [f"# Where a {value_size}-byte record's CPU goes", "",
             f"{meta['date']}; {meta['machine']['cpu_model']}, {meta['machine']['cores']} cores; "
             f"Python {meta['machine']['python']}.",
             f"Versions: {'; '.join(f'{k} {v}' for k, v in meta['versions'].items())}.",
             f"Command: `{meta['command']}`.", "",
             "ns of CPU per record in steady state (perf's cpu-clock samples, a run of "
             f"{meta['records']:,} records less one of {meta['small']:,}), by thread and part:",
             "", "| thread / part | " + " | ".join(clients) + " | floor |",
             "|---|" + "---:|" * (len(clients) + 1)]
    floor_of = {"copy into the batch": floor["memcpy"] * kib, "CRC32C": floor["crc32c"] * kib,
                "kernel, copy to the socket": floor["kernel_send"] * kib}
    keys = sorted({k for r in rows.values() for k in r["per_record"]},
                  key=lambda k: (k.split("/")[0] != "caller", PARTS.index(k.split("/", 1)[1])))
    for k in keys:
        cells = [f"{rows[c]['per_record'].get(k, 0):.0f}" for c in clients]
        fl = floor_of.get(k.split("/", 1)[1])
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {'' if fl is None else f'{fl:.0f}'}"
                     " |")
    lines.append("| **all** | " + " | ".join(
        f"**{sum(rows[c]['per_record'].values()):.0f}**" for c in clients) + " | |")
    lines += ["", "Floors, ns per KiB: memcpy {memcpy:.1f}, CRC32C {crc32c:.1f}, a loopback TCP "
              "writer's kernel {kernel_send:.1f} (the floor column: a record's "
              "{kib:.2f} KiB).".format(kib=kib, **floor), "",
              "Each client's rate in the large run: " + "; ".join(
                  f"{c} {rows[c]['records_per_s']:,.0f} records/s at "
                  f"{rows[c]['cpu_s_per_m']:.2f} CPU s per million" for c in clients) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="pyprod,confluent-kafka")
    ap.add_argument("--records", type=int, default=2_500_000)
    ap.add_argument("--small", type=int, default=250_000)
    ap.add_argument("--name", default="byte_costs")
    ap.add_argument("--out-dir", default=compare.RESULTS)
    args = ap.parse_args(argv)
    if args.small >= args.records:
        ap.error("--small must be below --records")
    clients = args.clients.split(",")
    rows = {}
    with _mock_broker.MockBroker() as broker:
        compare.warm_broker(broker, clients, ["1KiB"], args.small)
        for c in clients:
            small = profile(broker, c, args.small)
            large = profile(broker, c, args.records)
            res = large["result"]
            rows[c] = {"per_record": per_record(small, large, args.records - args.small),
                       "records_per_s": args.records / res["wall_s"],
                       "cpu_s_per_m": res["cpu_s"] / args.records * 1e6}
            print(f"{c}: {sum(rows[c]['per_record'].values()):.0f} ns per record", flush=True)
    floor = floors()
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["python bench/byte_costs.py"] + list(
                sys.argv[1:] if argv is None else argv)),
            "machine": compare.machine_info(), "versions": compare.versions(clients),
            "records": args.records, "small": args.small}
    meta["versions"]["mock broker"] = _mock_broker.version()
    text = markdown(meta, rows, floor, workload_spec("1KiB")["value_size"])
    before_after.write(os.path.join(args.out_dir, args.name),
                       {"meta": meta, "rows": rows, "floors": floor}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
