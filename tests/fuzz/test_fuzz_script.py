"""The fuzzer itself: check() reports what it must (untyped exceptions, twin disagreements), and
scripts/fuzz.py (the long run) runs every target and exits 0 with no findings."""
import os
import random
import subprocess
import sys

from pyprod.errors import KafkaProtocolError
from tests.harness import fuzz

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "fuzz.py")


def _seed(case, rng, lie):
    return rng.randbytes(4)


def _typed(case, data):
    if not data or data[0] & 1:
        raise KafkaProtocolError("empty or odd")
    return data[0]


def _untyped(case, data):
    return data[10]  # IndexError on short inputs


def test_check_reports_untyped_errors_and_twin_disagreements():
    rng = random.Random(1)
    assert fuzz.run(fuzz.Target("ok", [None], _seed, _typed, _typed), 200, rng) == []
    found = fuzz.run(fuzz.Target("bad", [None], _seed, _untyped), 50, rng)
    assert found and {(f.kind, f.error) for f in found} == {("untyped", "IndexError")}
    assert found[0].where.startswith("test_fuzz_script.py:")
    differ = fuzz.run(fuzz.Target("twins", [None], _seed, _typed, lambda c, d: _typed(c, d[::-1])),
                      50, rng)
    assert differ and {f.kind for f in differ} == {"disagree"}


def test_mutations_stay_bytes_and_vary():
    rng = random.Random(2)
    seen = {fuzz.mutate(b"\x00\x01\x02\x03" * 8, rng, [b"xyz"]) for _ in range(300)}
    assert len(seen) > 250 and all(type(s) is bytes for s in seen)
    assert fuzz.mutate(b"", rng)  # an empty input grows
    assert fuzz.uvarint_bytes(1, 4) == b"\x81\x80\x80\x80\x00"


def _script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


def test_script_runs_every_target(fuzz_targets):
    total = 100 * len(fuzz_targets)
    out = _script("--inputs", str(total), "--chunk", "40", "--progress-s", "0")
    assert out.returncode == 0, out.stdout + out.stderr
    for name in fuzz_targets:
        assert any(line.split()[:2] == [name, "100"] for line in out.stdout.splitlines()), \
            (name, out.stdout)
    assert "fuzz: %d inputs, 0 finding(s)" % total in out.stdout


def test_script_jobs_and_target_choice():
    out = _script("--inputs", "300", "--per-target", "--jobs", "2", "--chunk", "100",
                  "--targets", "produce_codec,oauthbearer")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "fuzz: 600 inputs, 0 finding(s)" in out.stdout
    out = _script("--targets", "nope")
    assert out.returncode == 2 and "unknown target(s): nope" in out.stderr
