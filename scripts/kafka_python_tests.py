#!/usr/bin/env python
"""Run kafka-python's own producer tests with pyprod.KafkaProducer in place of kafka-python's.

    python scripts/kafka_python_tests.py [--pinned] [--list] [--json PATH] [--keep]
                                         [--kafka-errors] [-- PYTEST ARGS]

1. The test files of the installed kafka-python version: its sdist, fetched once with
   ``pip download --no-binary :all: --no-deps kafka-python==<version>`` into
   .cache/kafka-python-tests/ (test/integration/test_producer_integration.py and what it imports).
   kafka-python's sdist has no test/producer/ (its unit tests of KafkaProducer): those, and the
   whole set when the download fails or with --pinned, come from the copy pinned under
   tests/compat/kafka_python/ (see its SOURCE.md).
2. Copied into a temporary directory with every ``KafkaProducer`` import (``from kafka import``,
   ``from kafka.producer[.kafka] import``, ``kafka[.producer[.kafka]].KafkaProducer``) swapped for
   pyprod's, and ``kafka.errors`` for ``pyprod.errors`` (pyprod raises its own classes with
   kafka-python's names; porting code changes that import too; --kafka-errors keeps
   kafka-python's). A conftest.py there takes tests/compat/kafka_python_conftest.py's fixtures (a
   real Kafka broker from tests.harness.kafka_cluster.KafkaCluster, in place of kafka-python's own setup).
3. Run with pytest. Tests that never use KafkaProducer (kafka-python's Sender, accumulator, ... on
   their own) are not run; tests listed in tests/compat/kafka_python_excluded.txt (they read
   kafka-python internals) are deselected with their reason. Every other test must pass.

Prints one line per test (passed / FAILED / ERROR / SKIPPED / excluded, with the reason) and exits
0 only if every test that ran passed and every exclusion still names a test. --list prints what
would run, with no broker. --json writes {"kafka_python_version", "source", "broker_version",
"tests": {node id: {"outcome", "message"}}, "unused_exclusions"}.
"""
from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = ROOT / "tests" / "compat" / "kafka_python"
CACHE = ROOT / ".cache" / "kafka-python-tests"

PINNED_SERIES = "3.0"  # the pinned copy is kafka-python 3.0.11's: used for 3.0.x only
# What runs: paths in kafka-python's checkout (plus the sdist's other test_producer*.py). From
# the sdist when it has them, else pinned.
TEST_FILES = (
    "test/integration/test_producer_integration.py",
    "test/producer/test_kip679_config.py",
    "test/producer/test_producer.py",
    "test/producer/test_sender.py",
    "test/producer/test_transaction_manager_mock_broker.py",
)
# What they import or take fixtures from (never run as tests here).
SUPPORT_FILES = (
    "test/__init__.py", "test/conftest.py", "test/testutil.py", "test/mock_broker.py",
    "test/test_mock_broker.py", "test/integration/__init__.py",
)
# (module, name) imports that become ``from pyprod import name``.
_SWAPPED = {("kafka", "KafkaProducer"), ("kafka.producer", "KafkaProducer"),
            ("kafka.producer.kafka", "KafkaProducer"), ("kafka", "errors")}
_KP_ATTRIBUTE = re.compile(r"\bkafka(?:\.producer(?:\.kafka)?)?\.KafkaProducer\b")


def installed_version() -> str:
    return importlib.metadata.version("kafka-python")


def fetch_sdist(version: str) -> Path | None:
    """kafka-python's sdist for ``version`` (downloaded once into .cache), or None."""
    CACHE.mkdir(parents=True, exist_ok=True)
    for path in CACHE.glob(f"kafka_python-{version}.tar.gz"):
        return path
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             "--disable-pip-version-check", "-q", "--timeout", "20", "--retries", "2",
             "-d", tmp, f"kafka-python=={version}"],
            capture_output=True, text=True, timeout=300)
        found = sorted(Path(tmp).glob("kafka_python-*.tar.gz"))
        if res.returncode != 0 or not found:
            sys.stderr.write(f"kafka_python_tests: pip download failed (exit {res.returncode}): "
                             f"{(res.stderr or res.stdout).strip()[-800:]}\n")
            return None
        return Path(shutil.move(str(found[0]), CACHE / found[0].name))


def sdist_files(sdist: Path) -> dict[str, str]:
    """{path in the checkout: text} of the sdist's test/ files."""
    out = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if member.isfile() and len(parts) == 2 and parts[1].startswith("test/"):
                out[parts[1]] = tar.extractfile(member).read().decode()
    return out


def pinned_files() -> dict[str, str]:
    return {str(p.relative_to(PINNED)): p.read_text() for p in PINNED.glob("test/**/*.py")}


def gather(version: str, use_pinned: bool) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(test files to run, {path: text} of every file to write, {path: where it came from})."""
    same_series = version.startswith(PINNED_SERIES + ".")
    pinned = pinned_files() if same_series else {}
    if not same_series:
        sys.stderr.write(f"kafka_python_tests: the pinned copy is for kafka-python "
                         f"{PINNED_SERIES}.x, not {version}: only the sdist's tests run\n")
    sdist = None if use_pinned else fetch_sdist(version)
    shipped = sdist_files(sdist) if sdist else {}
    found = sorted(p for p in shipped if re.fullmatch(r"test/(.+/)?test_producer[^/]*\.py", p))
    tests = list(dict.fromkeys(list(TEST_FILES) + found))
    files, origin = {}, {}
    for path in tests + list(SUPPORT_FILES):
        if path in shipped:
            files[path], origin[path] = shipped[path], f"sdist {sdist.name}"
        elif path in pinned:
            files[path], origin[path] = pinned[path], "pinned tests/compat/kafka_python (3.0.11)"
        elif path in tests:
            sys.stderr.write(f"kafka_python_tests: {path}: not in kafka-python {version}'s "
                             f"sdist, and no pinned copy for it: not run\n")
    tests = [p for p in tests if p in files]
    if not tests:
        raise SystemExit("kafka_python_tests: no kafka-python test file to run")
    return tests, files, origin


def swap_imports(source: str, errors: bool = True) -> tuple[str, int]:
    """``source`` with kafka-python's KafkaProducer replaced by pyprod's and, with ``errors``,
    kafka.errors by pyprod.errors (pyprod's exceptions are its own classes with kafka-python's
    names: porting code changes that import too); (text, imports changed)."""
    swapped = {(m, n) for m, n in _SWAPPED if errors or n != "errors"}
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line index, last line index, replacement lines)

    def alias(a):
        return a.name + (f" as {a.asname}" if a.asname else "")

    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        indent = re.match(r"\s*", lines[node.lineno - 1]).group()
        if errors and isinstance(node, ast.Import) and \
                any(a.name == "kafka.errors" for a in node.names):
            if len(node.names) != 1 or not node.names[0].asname:
                raise AssertionError(f"line {node.lineno}: cannot swap {ast.unparse(node)}")
            new = [f"{indent}import pyprod.errors as {node.names[0].asname}\n"]
        elif errors and isinstance(node, ast.ImportFrom) and node.level == 0 and \
                node.module == "kafka.errors":
            new = [f"{indent}from pyprod.errors import "
                   f"{', '.join(alias(a) for a in node.names)}\n"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and \
                any((node.module, a.name) in swapped for a in node.names):
            ours = [a for a in node.names if (node.module, a.name) in swapped]
            rest = [a for a in node.names if (node.module, a.name) not in swapped]
            new = [f"{indent}from pyprod import {', '.join(alias(a) for a in ours)}\n"]
            if rest:
                new.insert(0, f"{indent}from {node.module} import "
                              f"{', '.join(alias(a) for a in rest)}\n")
        else:
            continue
        edits.append((node.lineno - 1, node.end_lineno - 1, new))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last + 1] = new
    text = "".join(lines)
    text, attrs = _KP_ATTRIBUTE.subn("pyprod.KafkaProducer", text)
    if attrs and not re.search(r"^import pyprod$", text, re.M):
        first = next(n for n in ast.parse(text).body if isinstance(n, (ast.Import, ast.ImportFrom))
                     and getattr(n, "module", None) != "__future__")
        lines = text.splitlines(keepends=True)
        lines.insert(first.lineno - 1, "import pyprod\n")
        text = "".join(lines)
    check_swapped(text, errors)
    return text, len(edits) + attrs


def check_swapped(text: str, errors: bool = True) -> None:
    """Raise if kafka-python's KafkaProducer (with ``errors``: kafka.errors) can still be
    reached by name in ``text``."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module != "pyprod" and \
                any(a.name == "KafkaProducer" for a in node.names):
            raise AssertionError(f"line {node.lineno}: KafkaProducer still from {node.module}")
        if isinstance(node, ast.Attribute) and node.attr == "KafkaProducer" and \
                ast.unparse(node.value) != "pyprod":
            raise AssertionError(f"line {node.lineno}: {ast.unparse(node)} not swapped")
        if errors and (isinstance(node, ast.ImportFrom) and node.module == "kafka.errors" or
                       isinstance(node, ast.Import) and
                       any(a.name == "kafka.errors" for a in node.names) or
                       isinstance(node, ast.ImportFrom) and node.module == "kafka" and
                       any(a.name == "errors" for a in node.names)):
            raise AssertionError(f"line {node.lineno}: kafka.errors still imported")


CONFTEST = '''\
# Written by scripts/kafka_python_tests.py: our fixtures for kafka-python's tests.
from tests.compat.kafka_python_conftest import *  # noqa: F401,F403
'''
PYTEST_INI = '''\
[pytest]
filterwarnings =
    ignore:read_text is deprecated:DeprecationWarning
    ignore:open_text is deprecated:DeprecationWarning
'''


def write_tree(workdir: Path, tests: list[str], files: dict[str, str],
               errors: bool = True) -> int:
    swaps = 0
    for path, text in files.items():
        if os.path.basename(path) == "conftest.py" and path != "test/conftest.py":
            continue  # kafka-python's broker fixtures: ours replace them
        if path in tests:
            text, n = swap_imports(text, errors)
            swaps += n
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (workdir / "conftest.py").write_text(CONFTEST)
    (workdir / "pytest.ini").write_text(PYTEST_INI)
    return swaps


def run_pytest(workdir: Path, tests: list[str], results: Path, extra: list[str],
               collect_only: bool, timeout: float) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYPROD_KP_RESULTS"] = str(results)
    argv = [sys.executable, "-m", "pytest", "-c", str(workdir / "pytest.ini"),
            "--rootdir", str(workdir), "-p", "no:cacheprovider", "-q",
            "--continue-on-collection-errors",
            *(["--collect-only"] if collect_only else []), *extra,
            *(str(workdir / p) for p in tests)]
    return subprocess.run(argv, cwd=workdir, env=env, timeout=timeout).returncode


def report(data: dict, out=sys.stdout) -> bool:
    """Print one line per test; True if every test that ran passed."""
    tests = data["tests"]
    counts = {}
    ok = True
    for nodeid in sorted(tests):
        t = tests[nodeid]
        outcome, msg = t["outcome"], (t.get("message") or "").strip()
        if outcome == "deselected":
            kind, _, reason = msg.partition(": ")
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "excluded":
                print(f"excluded  {nodeid}  -- {reason}", file=out)
            continue
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "passed":
            print(f"passed    {nodeid}", file=out)
            continue
        ok = False
        last = msg.splitlines()[-1] if msg else ""
        print(f"{outcome.upper():9} {nodeid}  -- {last[:300]}", file=out)
    print("kafka_python_tests: kafka-python %s (%s), Kafka %s: %s" % (
        data["kafka_python_version"], data["source"], data.get("broker_version", "?"),
        ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))), file=out)
    return ok and counts.get("passed", 0) > 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pinned", action="store_true",
                    help="use the pinned copy only (no download)")
    ap.add_argument("--list", action="store_true",
                    help="show what would run (pytest --collect-only); no broker")
    ap.add_argument("--json", help="write every test's outcome here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--kafka-errors", action="store_true",
                    help="leave kafka.errors imports alone (swap KafkaProducer only)")
    ap.add_argument("--timeout", type=float, default=900, help="pytest's wall-clock limit (s)")
    ap.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = ap.parse_args(argv)

    version = installed_version()
    tests, files, origin = gather(version, args.pinned)
    sources = sorted(set(origin[p] for p in tests))
    workdir = Path(tempfile.mkdtemp(prefix="pyprod-kafka-python-tests-"))
    try:
        swaps = write_tree(workdir, tests, files, errors=not args.kafka_errors)
        print(f"kafka_python_tests: kafka-python {version}; {swaps} imports of KafkaProducer"
              f"{'' if args.kafka_errors else ' and kafka.errors'} swapped for pyprod's in "
              f"{workdir}", flush=True)
        for path in tests:
            print(f"  {path}: {origin[path]}", flush=True)
        results = workdir / "results.json"
        rc = run_pytest(workdir, tests, results, args.pytest_args, args.list, args.timeout)
        if args.list:
            return rc
        if not results.exists():
            print(f"kafka_python_tests: pytest exited {rc} without results", file=sys.stderr)
            return rc or 1
        data = json.loads(results.read_text())
        data.update(kafka_python_version=version, source=" + ".join(sources))
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1, sort_keys=True))
        ok = report(data)
        for entry in () if args.pytest_args else data.get("unused_exclusions", ()):
            print(f"kafka_python_tests: stale exclusion (matches no test): {entry}")
            ok = False
        return 0 if ok and rc == 0 else 1
    finally:
        if args.keep:
            print(f"kafka_python_tests: kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
