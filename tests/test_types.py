"""The public API's types: `mypy --strict` on a program calling every public method
(tests/typing/), and stubtest checking pyprod/producer.pyi against the module it describes."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPING = os.path.join(ROOT, "tests", "typing")


def _run(*args):
    res = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_on_the_public_api(tmp_path):
    programs = sorted(os.path.join(TYPING, f) for f in os.listdir(TYPING) if f.endswith(".py"))
    _run("mypy", "--strict", "--cache-dir", str(tmp_path), *programs)


def test_producer_stub_matches_the_module(tmp_path):
    _run("mypy.stubtest", "pyprod.producer", "--mypy-config-file", os.devnull,
         "--allowlist", os.path.join(TYPING, "stubtest_allowlist.txt"))
