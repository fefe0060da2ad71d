"""scripts/wheels_tools.py, the Python half of scripts/wheels.sh: the cibuildwheel test step it
replays for each ABI, and the results table docs/results/wheels.md is written from."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "scripts", "wheels_tools.py")

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the script needs tomllib")


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, TOOLS, *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def test_the_free_threaded_override_selects_only_cp3xxt():
    gil = run("cibw", "cp313-manylinux_x86_64").splitlines()
    ft = run("cibw", "cp313t-manylinux_aarch64").splitlines()
    assert gil[-1] == ft[-1] and "pytest -x -q tests/kernels" in gil[-1]  # the same test-command
    assert {"lz4", "zstandard"} <= set(gil[:-1])
    assert set(ft[:-1]) == set(gil[:-1]) - {"lz4", "zstandard"}


def test_only_cp313t_runs_with_the_gil_forced_off():
    assert run("cibw-env", "cp313t-manylinux_x86_64").split() == ["PYTHON_GIL=0"]
    assert run("cibw-env", "cp314t-manylinux_x86_64") == ""
    assert run("cibw-env", "cp313-macosx_arm64") == ""


def test_rows_are_rewritten_one_by_one(tmp_path):
    tsv, md = str(tmp_path / "r.tsv"), str(tmp_path / "out" / "wheels.md")
    run("record", tsv, "cp312", "x86_64", "built=yes", "size=1530000", "tested=failed")
    run("record", tsv, "cp310", "aarch64", "built=yes", "tested=passed", "counts=9 passed")
    run("record", tsv, "cp312", "x86_64", "tested=passed", "counts=1091 passed\tin 30 s")
    text = run("table", tsv, md)
    assert open(md).read() == text
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in text.splitlines()
            if line.startswith("| cp")}
    assert len(rows) == 14  # seven ABIs x two arches, the missing ones "not run yet"
    assert "| yes (1.53 MB) | passed | 1091 passed in 30 s |" in rows["cp312", "x86_64"]
    assert "| passed | 9 passed |" in rows["cp310", "aarch64"]
    assert "not run yet" in rows["cp314t", "aarch64"]
    assert list(rows)[:3] == [("cp310", "x86_64"), ("cp310", "aarch64"), ("cp311", "x86_64")]
    with pytest.raises(subprocess.CalledProcessError):
        run("record", tsv, "cp312", "x86_64", "colour=blue")
