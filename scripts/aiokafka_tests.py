#!/usr/bin/env python
"""Run aiokafka's own producer tests with pyprod.aio.AIOKafkaProducer in place of aiokafka's.

    python scripts/aiokafka_tests.py [--list] [--json PATH] [--keep] [-- PYTEST ARGS]

1. The test files: tests/test_producer.py and tests/test_transactional_producer.py of aiokafka
   (with the tests/_testutil.py they import), pinned under tests/compat_aio/aiokafka/ (see its
   SOURCE.md): aiokafka's sdist ships no tests.
2. Copied into a temporary directory (aiokafka's ``tests`` package as ``aiokafka_tests``) with
   the test modules' ``AIOKafkaProducer`` import swapped for pyprod.aio's. Their
   ``aiokafka.errors`` imports stay: code that catches aiokafka's classes must work
   unchanged (pyprod.aio.errors). A conftest.py there takes
   tests/compat_aio/aiokafka_conftest.py's fixtures (a real Kafka broker from
   tests.harness.kafka_cluster.KafkaCluster, in place of aiokafka's Docker one).
3. Run with pytest (scripts/kafka_python_tests.py's runner and result hooks). Tests listed in
   tests/compat_aio/aiokafka_excluded.txt (they read or mock aiokafka internals) are deselected
   with their reason; every other test must pass.

Prints one line per test and exits 0 only if every test that ran passed and every exclusion
still names a test. --list prints what would run, with no broker. --json writes
{"aiokafka_version", "broker_version", "tests": {node id: {"outcome", "message"}},
"unused_exclusions"}.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.metadata
import json
import re
import runpy
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tests" / "compat_aio" / "aiokafka"
PINNED_SERIES = "0.14"  # the pinned copy is aiokafka 0.14.0's
TEST_FILES = ("tests/test_producer.py", "tests/test_transactional_producer.py")
SUPPORT_FILES = ("tests/_testutil.py",)
PACKAGE = "aiokafka_tests"  # aiokafka's tests/ in the work directory
_MODULES = {"aiokafka", "aiokafka.producer", "aiokafka.producer.producer"}

CONFTEST = '''\
# Written by scripts/aiokafka_tests.py: our fixtures for aiokafka's tests.
from tests.compat_aio.aiokafka_conftest import *  # noqa: F401,F403
'''


def swap_imports(source: str) -> tuple[str, int]:
    """``source`` with aiokafka's AIOKafkaProducer imports replaced by pyprod.aio's;
    (text, imports changed). Raises if one is left."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and
                node.module in _MODULES and
                any(a.name == "AIOKafkaProducer" for a in node.names)):
            continue
        indent = re.match(r"\s*", lines[node.lineno - 1]).group()
        names = [a.name + (f" as {a.asname}" if a.asname else "") for a in node.names]
        ours = [n for n, a in zip(names, node.names) if a.name == "AIOKafkaProducer"]
        rest = [n for n, a in zip(names, node.names) if a.name != "AIOKafkaProducer"]
        new = [f"{indent}from pyprod.aio import {', '.join(ours)}\n"]
        if rest:
            new.insert(0, f"{indent}from {node.module} import {', '.join(rest)}\n")
        edits.append((node.lineno - 1, node.end_lineno - 1, new))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last + 1] = new
    text = "".join(lines)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module != "pyprod.aio" and \
                any(a.name == "AIOKafkaProducer" for a in node.names):
            raise AssertionError(f"line {node.lineno}: AIOKafkaProducer still from "
                                 f"{node.module}")
        if isinstance(node, ast.Attribute) and node.attr == "AIOKafkaProducer":
            raise AssertionError(f"line {node.lineno}: {ast.unparse(node)} not swapped")
    return text, len(edits)


def write_tree(workdir: Path, pytest_ini: str) -> int:
    swaps = 0
    for path in TEST_FILES + SUPPORT_FILES:
        text = (PINNED / path).read_text()
        if path in TEST_FILES:
            text, n = swap_imports(text)
            swaps += n
        target = workdir / PACKAGE / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (workdir / PACKAGE / "__init__.py").write_text("")
    (workdir / "conftest.py").write_text(CONFTEST)
    (workdir / "pytest.ini").write_text(pytest_ini)
    return swaps


def report(data: dict, out=sys.stdout) -> bool:
    """One line per test; True if every test that ran passed (and some did)."""
    counts = collections.Counter()
    for nodeid, t in sorted(data["tests"].items()):
        outcome, msg = t["outcome"], (t.get("message") or "").strip()
        if outcome == "deselected":
            outcome, msg = "excluded", msg.partition(": ")[2]
        counts[outcome] += 1
        last = msg.splitlines()[-1][:300] if msg else ""
        print(f"{outcome:9} {nodeid}" + (f"  -- {last}" if last else ""), file=out)
    print("aiokafka_tests: aiokafka %s (pinned tests), Kafka %s: %s" % (
        data["aiokafka_version"], data.get("broker_version", "?"),
        ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))), file=out)
    return counts["passed"] > 0 and set(counts) <= {"passed", "excluded"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true",
                    help="show what would run (pytest --collect-only); no broker")
    ap.add_argument("--json", help="write every test's outcome here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--timeout", type=float, default=900, help="pytest's wall-clock limit (s)")
    ap.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = ap.parse_args(argv)

    version = importlib.metadata.version("aiokafka")
    if not version.startswith(PINNED_SERIES + "."):
        sys.stderr.write(f"aiokafka_tests: the pinned tests are aiokafka {PINNED_SERIES}.x's, "
                         f"aiokafka {version} is installed\n")
    kp = runpy.run_path(str(ROOT / "scripts" / "kafka_python_tests.py"))  # runner, pytest.ini
    workdir = Path(tempfile.mkdtemp(prefix="pyprod-aiokafka-tests-"))
    try:
        swaps = write_tree(workdir, kp["PYTEST_INI"])
        print(f"aiokafka_tests: aiokafka {version}; {swaps} imports of AIOKafkaProducer "
              f"swapped for pyprod.aio's in {workdir}", flush=True)
        tests = [f"{PACKAGE}/{Path(p).name}" for p in TEST_FILES]
        results = workdir / "results.json"
        rc = kp["run_pytest"](workdir, tests, results, args.pytest_args, args.list,
                              args.timeout)
        return rc if args.list else _verdict(rc, results, version, args)
    finally:
        if args.keep:
            print(f"aiokafka_tests: kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _verdict(rc, results, version, args) -> int:
    """Report the run's results; 0 if they all passed and no exclusion is stale."""
    if not results.exists():
        print(f"aiokafka_tests: pytest exited {rc} without results", file=sys.stderr)
        return rc or 1
    data = dict(json.loads(results.read_text()), aiokafka_version=version)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1, sort_keys=True))
    stale = [] if args.pytest_args else data.get("unused_exclusions", [])
    for entry in stale:
        print(f"aiokafka_tests: stale exclusion (matches no test): {entry}")
    return 0 if report(data) and not stale and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
