"""Issue 27's stress rounds from the outside: run one round (stress_round.py) in its own
process, read the topic back with confluent-kafka and check it byte for byte against the
round's manifest. Shared by tests/integration/test_concurrency_stress.py and scripts/soak.py.

Each value carries its identity and checksum (see make_value), so any record read back can be
checked on its own, even when the round crashed before writing its manifest.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zlib

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stress_round.py")
MAGIC = b"PS"
_HEAD = struct.Struct(">2sBBIII")  # magic, thread, variant, seq, body length, body crc32
HEAD_SIZE = _HEAD.size + 4         # and a crc32 of the head itself
FORK_TID = 99                      # what the forked child sends (FORK_RECORDS, once each)
FORK_RECORDS = 2                   # per fork: one send(), one send_batch() (stress_fork.py)
SHOW = 6                           # examples kept per kind of finding
RAN = "ran to the end"


def make_value(tid: int, seq: int, body: bytes, variant: int = 0) -> bytes:
    head = _HEAD.pack(MAGIC, tid, variant, seq, len(body), zlib.crc32(body))
    return head + struct.pack(">I", zlib.crc32(head)) + body


def parse_value(value) -> tuple[int, int]:
    """(thread, seq) of an intact value; ValueError saying what is wrong otherwise."""
    if value is None or len(value) < HEAD_SIZE:
        raise ValueError(f"{'null' if value is None else len(value)} bytes: no head")
    head = value[:_HEAD.size]
    magic, tid, _variant, seq, size, crc = _HEAD.unpack(head)
    if magic != MAGIC or struct.unpack(">I", value[_HEAD.size:HEAD_SIZE])[0] != zlib.crc32(head):
        raise ValueError("head checksum mismatch")
    body = value[HEAD_SIZE:]
    if len(body) != size:
        raise ValueError(f"thread {tid} seq {seq}: body of {len(body)} bytes, head says {size}")
    if zlib.crc32(body) != crc:
        raise ValueError(f"thread {tid} seq {seq}: body checksum mismatch ({size} bytes)")
    return tid, seq


class Findings:
    """Problems by kind, with a few examples of each."""

    def __init__(self):
        self.count = collections.Counter()
        self.examples = collections.defaultdict(list)

    def add(self, kind: str, example: str = "", n: int = 1) -> None:
        self.count[kind] += n
        if example and len(self.examples[kind]) < SHOW:
            self.examples[kind].append(example)

    def __bool__(self):
        return bool(self.count)

    def lines(self) -> list[str]:
        out = []
        for kind, n in self.count.items():
            out.append(f"{kind}: {n}")
            out.extend(f"    {e}" for e in self.examples[kind])
        return out


def _hdrs(pairs) -> list:
    return [(k, None if v is None else bytes.fromhex(v)) for k, v in pairs]


def verify(manifest: dict | None, read: list) -> tuple[Findings, dict]:
    """Check the records read back (readback.Record, in (partition, offset) order) against the
    manifest (None: the round died; only each record's own checksum can be checked)."""
    bad = Findings()
    recs = {}
    for tid, seq, key, crcs, hdrs, call, state, part, off, ts in \
            (manifest or {}).get("records", []):
        recs[(tid, seq)] = (None if key is None else bytes.fromhex(key), crcs, _hdrs(hdrs), call,
                            state, part, off, ts)
    calls = (manifest or {}).get("calls", {})
    seen, last, per_call = {}, {}, collections.defaultdict(collections.Counter)
    forked = 0
    for r in read:
        where = f"partition {r.partition} offset {r.offset}"
        try:
            rid = parse_value(r.value)
        except ValueError as e:
            excerpt = (r.value or b"")[:24].hex()
            bad.add("corrupt record (checksum)", f"{where}: {e}; first bytes {excerpt}")
            continue
        if rid in seen:
            bad.add("duplicate", f"thread {rid[0]} seq {rid[1]} at {seen[rid]} and {where}")
            continue
        seen[rid] = where
        if rid[0] == FORK_TID:  # the forked child's own (docs/fork.md)
            forked += 1
            continue
        if manifest is None:
            continue
        if rid not in recs:
            bad.add("record never sent by the round", f"thread {rid[0]} seq {rid[1]} at {where}")
            continue
        key, crcs, hdrs, call, state, part, off, ts = recs[rid]
        what = f"thread {rid[0]} seq {rid[1]} ({state}) at {where}"
        if zlib.crc32(r.value) not in crcs:
            bad.add("value differs from what was sent", what)
        if r.key != key:
            bad.add("key differs", f"{what}: sent {key!r}, read {r.key!r}")
        if r.headers != hdrs:
            bad.add("headers differ", f"{what}: sent {hdrs!r}, read {r.headers!r}")
        if ts is not None and r.timestamp != ts:
            bad.add("timestamp differs", f"{what}: sent {ts}, read {r.timestamp}")
        if state == "refused":
            bad.add("record of a call that raised was sent", what)
        if key is not None and r.partition not in _key_places(key, manifest):
            bad.add("keyed record in a partition its key never maps to", what)
        if state == "acked" and part is not None and (part, off) != (r.partition, r.offset):
            bad.add("send() metadata names another place", f"{what}: metadata says {part}@{off}")
        prev = last.get((rid[0], r.partition))
        if prev is not None and prev > rid[1]:
            bad.add("thread order broken within a partition", f"{what} after seq {prev}")
        last[(rid[0], r.partition)] = rid[1]
        if call is not None:
            per_call[call][r.partition] += 1
    acked = [rid for rid, v in recs.items() if v[4] == "acked"]
    for rid in acked:
        if rid not in seen:
            bad.add("acknowledged record missing", f"thread {rid[0]} seq {rid[1]}")
    for call, c in calls.items():
        want = c.get("partition_counts")
        got = dict(per_call[int(call)])
        if want is not None and {int(k): v for k, v in want.items()} != got:
            bad.add("send_batch partition_counts differ from what was read",
                    f"call {call} ({c['kind']}): future says {want}, read {got}")
    if manifest is not None:
        want = FORK_RECORDS * manifest["covered"].get("forks whose child behaved", 0)
        if forked != want:
            bad.add("the forked child's records", f"read {forked}, its calls returned {want}")
        states = collections.Counter(v[4] for v in recs.values())
        if states["pending"]:
            bad.add("future never completed (after close())", f"{states['pending']} records")
        if states["failed"]:
            bad.add("future failed (nothing here should fail)", f"{states['failed']} records")
        for kind, n in manifest["error_counts"].items():
            examples = [e["detail"] for e in manifest["errors"] if e["kind"] == kind]
            for i, e in enumerate(examples):
                bad.add("in the round: " + kind, e, n if i == 0 else 0)
    figures = dict(read=len(read), acked=len(acked), intact=len(seen))
    return bad, figures


def _key_places(key, manifest):
    """The partitions Java's murmur2 puts key in, for each partition count the topic had
    (kafka-python's murmur2: not this project's)."""
    from kafka.partitioner.default import murmur2

    h = murmur2(key) & 0x7FFFFFFF
    return {h % n for n in manifest.get("counts") or (2, 8, 16)}


@dataclasses.dataclass
class RoundResult:
    seed: int
    impl: str
    seconds: float
    outcome: str                  # "ran to the end", "crashed (SIGSEGV)", "hung", "exit 1"...
    findings: Findings
    figures: dict
    stack: str = ""               # the child's stack / sanitizer report, when it died

    @property
    def ok(self) -> bool:
        return self.outcome == RAN and not self.findings

    def report(self) -> str:
        f = self.figures
        n = sum(self.findings.count.values())
        verdict = "ok" if self.ok else "FAILED" + (f" ({n} findings)" if n else "")
        head = (f"stress round seed={self.seed} impl={self.impl}: {verdict}; {self.outcome}, "
                f"{f.get('acked', '?')} acknowledged, {f.get('read', '?')} read back "
                f"({f.get('intact', '?')} intact), {self.seconds:.1f}s")
        lines = [head] + _covered(f.get("covered", {}))
        lines += ["  " + s for s in self.findings.lines()]
        if not self.ok:
            lines.append(f"  again: python scripts/soak.py --rounds 1 --impl {self.impl} "
                         f"--seed {self.seed}  (or PYPROD_STRESS_SEED={self.seed})")
        if self.stack:
            lines += ["  --- child stderr (excerpt) ---"] + ["  " + s for s in
                                                            self.stack.splitlines()]
        return "\n".join(lines)


_SANITIZER = ("ERROR: AddressSanitizer", "runtime error:")


def _stacks(lines: list[str]) -> list[str]:
    """From faulthandler dumps: each dump's first line, the crashing thread and the threads
    inside pyprod, without the threading module's frames."""
    out, block = [], []

    def close():
        if block and (block[0].startswith("Current") or
                      any("/pyprod/" in x or "/kcore/" in x for x in block)):
            out.extend(block)
        block.clear()

    for line in lines:
        if line.startswith(("Fatal Python error", "Timeout (")):
            close()
            out.append(line)
        elif line.startswith(("Thread 0x", "Current thread")):
            close()
            block.append(line)
        elif not line.startswith("  "):
            close()
        elif block and "/threading.py" not in line:
            block.append(line)
    close()
    return out


def _excerpt(stderr: str, limit: int = 80) -> str:
    """What a reader needs from a round's stderr: a sanitizer report, faulthandler stacks,
    or the last Python traceback."""
    for marker in _SANITIZER:
        at = stderr.find(marker)
        if at >= 0:
            report = stderr[stderr.rfind("\n", 0, at) + 1:].split("Shadow bytes around")[0]
            return "\n".join(report.splitlines()[:limit])
    names = dict(re.findall(r"stress_round: thread (0x[0-9a-f]+) is (.*)", stderr))
    lines = [re.sub(r"^((?:Current t|T)hread (0x[0-9a-f]+))",
                    lambda m: f"{m[1]} [{names.get(m[2], '?')}]", x)
             for x in stderr.splitlines()]
    out = _stacks(lines)
    if not out and "Traceback" in stderr:
        out = stderr[stderr.rfind("Traceback"):].splitlines()
    if not any(x.startswith(("Current", "Thread", "Traceback")) for x in out):
        out += lines[-20:]  # no stack (the dump itself died): the end of stderr
    return "\n".join(out[:limit])


def _outcome(rc: int, stderr: str) -> str:
    if rc == 0:
        return RAN
    if rc < 0:
        try:
            return f"crashed ({signal.Signals(-rc).name})"
        except ValueError:
            return f"crashed (signal {-rc})"
    if "Timeout (" in stderr:
        return "hung (the round's watchdog fired)"
    if "AddressSanitizer" in stderr or "runtime error:" in stderr:
        return "sanitizer report"
    return f"exit {rc}"


def run_round(bootstrap: str, topic: str, seed: int, impl: str, workdir: str, *,
              small: bool = False, guard: float = 240.0, extra_args=()) -> RoundResult:
    """One round in a child process on ``topic`` (2 partitions, grown by the child), then the
    read-back check. impl: "compiled" or "pure" (PYPROD_NO_EXTENSIONS=1)."""
    from tests.harness.readback import read_all_confluent

    manifest_path = os.path.join(workdir, f"manifest-{impl}-{seed}.json")
    env = dict(os.environ)  # keeps a sanitizer's LD_PRELOAD, PYTHONPATH, ...
    env.pop("PYPROD_NO_EXTENSIONS", None)
    if impl == "pure":
        env["PYPROD_NO_EXTENSIONS"] = "1"
    cmd = [sys.executable, CHILD, "--bootstrap", bootstrap, "--topic", topic, "--seed",
           str(seed), "--impl", impl, "--manifest", manifest_path, "--guard", str(guard),
           *(["--small"] if small else []), *extra_args]
    start = time.monotonic()
    # own session: a forked grandchild left behind is killed with it
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        err = proc.communicate(timeout=guard + 60)[1]
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGABRT)  # faulthandler prints the stacks first
        try:
            err = proc.communicate(timeout=20)[1]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            err = proc.communicate()[1]
        rc = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a forked grandchild still running
        except ProcessLookupError:
            pass
    err = err.decode("utf-8", "replace")
    outcome = "killed by the test's timeout" if rc is None else _outcome(rc, err)
    manifest = None
    if rc == 0:
        with open(manifest_path) as f:
            manifest = json.load(f)
    if manifest is not None:  # the consumer's metadata must know every partition
        _wait_partitions(bootstrap, topic, manifest["partitions"])
    read = read_all_confluent(bootstrap, topic, timeout=120, logger=_quiet())
    findings, figures = verify(manifest, read)
    if manifest is not None:
        figures["covered"] = manifest["covered"]
    result = RoundResult(seed, impl, time.monotonic() - start, outcome, findings, figures)
    if not result.ok:
        result.stack = _excerpt(err)
    return result


def _quiet():
    log = logging.getLogger("stress_check.rdkafka")
    log.propagate = False
    log.handlers[:] = [logging.NullHandler()]
    return log


def _wait_partitions(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _quiet()})
    deadline = time.monotonic() + timeout
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: fewer than {n} partitions after {timeout} s")
        time.sleep(0.1)


def totals(results: list[RoundResult]) -> str:
    """One paragraph over many rounds: rounds, records and interleavings covered."""
    cover = collections.Counter()
    for r in results:
        cover.update(r.figures.get("covered", {}))
    bad = [r for r in results if not r.ok]
    acked = sum(r.figures.get("acked", 0) for r in results)
    outcomes = collections.Counter(r.outcome for r in results)
    return "\n".join([f"{len(results)} rounds ("
                      f"{', '.join(f'{n} {o}' for o, n in outcomes.items())}), {len(bad)} "
                      f"failed; {acked} records acknowledged and checked"] + _covered(cover))


def _covered(cover: dict) -> list[str]:
    text = ", ".join(f"{k} {v}" for k, v in sorted(cover.items()))
    return textwrap.wrap(text, 100, initial_indent="  covered: ", subsequent_indent="    ")


def seeds_from_env(default_count: int) -> list[int]:
    """PYPROD_STRESS_SEED=S pins the first seed (default: a new one each run)."""
    base = os.environ.get("PYPROD_STRESS_SEED")
    base = int(base) if base else int(time.time() * 1000) % 1_000_000
    return [base + i for i in range(default_count)]


def sanitized() -> bool:
    return bool(os.environ.get("PYPROD_SANITIZE_BUILD")) or "libasan" in \
        os.environ.get("LD_PRELOAD", "")

