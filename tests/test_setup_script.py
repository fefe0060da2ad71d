"""scripts/setup.sh without installing anything (PYPROD_SETUP_DRY_RUN=1, in a copy of the files
it reads): run-demo.sh's `demo` mode asks for the JDK, Maven and the `demo` extra only, never
Kerberos nor the `test` extra; the stamp in .venv moves a demo venv to the test extra and back
with the least work; the `demo` extra covers what the demo imports."""
import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KRB5 = ("krb5-kdc", "krb5-admin-server", "krb5-user", "libkrb5-dev")
STAMP = ".venv/.pyprod-setup-stamp"


def _extra(name: str) -> set:
    """The distribution names of one [project.optional-dependencies] list (no tomllib: 3.10)."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    block = re.search(rf"^{name} = \[(.*?)\]\s*$", text, re.S | re.M).group(1)
    block = "\n".join(line.split("#", 1)[0] for line in block.splitlines())
    return {_norm(re.match(r"[\w.-]+", req).group(0)) for req in re.findall(r'"([^"]+)"', block)}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_demo_extra_is_part_of_the_test_extra():
    assert _extra("demo") <= _extra("test"), _extra("demo") - _extra("test")


def test_demo_extra_covers_what_the_demo_imports():
    """Every module outside the standard library that the demo, its read-back and the broker it
    starts import comes from the demo extra or pyprod's own dependencies."""
    files = [os.path.join(ROOT, "examples", "demo.py"),
             os.path.join(ROOT, "tests", "harness", "readback.py")]
    broker = os.path.join(ROOT, "src", "pyprod", "local_broker")
    files += [os.path.join(broker, n) for n in os.listdir(broker) if n.endswith(".py")]
    modules = set()
    for path in files:
        with open(path) as f:
            for node in ast.walk(ast.parse(f.read())):
                if isinstance(node, ast.Import):
                    modules.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    modules.add(node.module.split(".")[0])
    modules -= set(sys.stdlib_module_names) | {"__future__", "kcore", "pyprod", "tests"}
    owners = importlib.metadata.packages_distributions()
    allowed = _extra("demo") | {_norm(r.split(";")[0].split("[")[0].split(">")[0].split("=")[0]
                                      .strip()) for r in importlib.metadata.requires("pyprod")
                                if "extra ==" not in r}
    assert modules, files
    for module in sorted(modules):
        dists = {_norm(d) for d in owners.get(module, [])}
        assert dists & allowed, f"the demo imports {module} ({dists}), not in the demo extra"


@pytest.fixture
def tree(tmp_path):
    """The files setup.sh reads, copied; a .venv whose python is this one; one compiled
    module, so that the stamp alone decides."""
    for name in ("scripts/setup.sh", "setup.py", "pyproject.toml"):
        os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    os.makedirs(tmp_path / "src" / "kcore")
    (tmp_path / "src" / "kcore" / "crc.so").write_bytes(b"")
    _venv_python(tmp_path)
    return tmp_path


def _venv_python(tree, options: str = "") -> None:
    """.venv/bin/python: this Python (which has pyprod's metadata) with ``options``."""
    path = tree / ".venv" / "bin" / "python"
    os.makedirs(path.parent, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" {options} "$@"\n')
    path.chmod(0o755)


def _dry_run(cwd, mode: str, path: str | None = None) -> str:
    env = dict(os.environ, PYPROD_SETUP_DRY_RUN="1", PATH=path or os.environ["PATH"])
    env.pop("PYPROD_NO_EXTENSIONS", None)
    out = subprocess.run(["/bin/bash", "-c", f". scripts/setup.sh {mode}"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _stamp_written(out: str) -> str:
    m = re.search(rf"^setup: would write {re.escape(STAMP)}: (.*)$", out, re.M)
    return m and m.group(1)


def test_bare_machine_demo_asks_for_no_kerberos(tmp_path):
    """On a PATH with nothing but python3 (no java, mvn, kinit, krb5-config, dpkg)."""
    os.makedirs(tmp_path / "bin")
    os.symlink(sys.executable, tmp_path / "bin" / "python3")
    os.symlink(shutil.which("id"), tmp_path / "bin" / "id")
    for name in ("scripts/setup.sh", "setup.py", "pyproject.toml"):
        os.makedirs(tmp_path / os.path.dirname(name), exist_ok=True)
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    bare = str(tmp_path / "bin")
    demo = _dry_run(tmp_path, "demo", bare)
    apt = re.search(r"^setup: installing (.*) with apt-get", demo, re.M).group(1).split()
    assert apt == ["openjdk-17-jdk-headless", "maven"], demo
    assert "krb5" not in demo and "[test]" not in demo, demo
    assert "pip install --no-build-isolation -e .[demo]" in demo, demo
    assert _stamp_written(demo).endswith(" demo")
    test = _dry_run(tmp_path, "test", bare)
    apt = re.search(r"^setup: installing (.*) with apt-get", test, re.M).group(1).split()
    assert apt[:2] == ["openjdk-17-jdk-headless", "maven"]
    assert {"krb5-user", "libkrb5-dev"} <= set(apt) <= {*apt[:2], *KRB5}, test
    assert "pip install --no-build-isolation -e .[test]" in test, test


def test_stamp_demo_then_tests_then_demo(tree):
    stamp = tree / STAMP
    first = _dry_run(tree, "demo")
    assert "-e .[demo]" in first and "Cython" in first, first
    deps, build, extra = _stamp_written(first).split()
    assert extra == "demo"
    stamp.write_text(f"{deps} {build} demo\n")
    assert "nothing to install" in _dry_run(tree, "demo")
    # run-tests.sh after the demo: the test extra's requirements, read from pyprod's metadata,
    # are added; kcore is not compiled again
    tests = _dry_run(tree, "test")
    assert "adding the test extra" in tests, tests
    pip = re.search(r"^setup: would run: python -m pip install (.*)$", tests, re.M).group(1)
    assert {_norm(re.match(r"[\w.-]+", r).group(0)) for r in pip.split()} == _extra("test"), pip
    assert "-e" not in pip.split() and "[" not in pip, pip
    assert _stamp_written(tests) == f"{deps} {build} test"
    stamp.write_text(f"{deps} {build} test\n")
    for mode in ("test", "demo"):  # then the demo (or the tests again): nothing to do
        out = _dry_run(tree, mode)
        assert "nothing to install" in out and "would run" not in out, out
    stamp.write_text(f"{deps} {build}\n")  # an older setup.sh's stamp: the test extra
    assert "nothing to install" in _dry_run(tree, "test")


def test_stamp_demo_then_tests_without_metadata(tree):
    """No pyprod metadata to read the extra from: pyprod is installed again with it."""
    deps, build, _ = _stamp_written(_dry_run(tree, "demo")).split()
    (tree / STAMP).write_text(f"{deps} {build} demo\n")
    _venv_python(tree, "-S")  # no site-packages: no metadata
    tests = _dry_run(tree, "test")
    assert "pip install --no-build-isolation -e .[test]" in tests, tests
    assert _stamp_written(tests) == f"{deps} {build} test"


def test_stamp_after_changes(tree):
    deps, build, _ = _stamp_written(_dry_run(tree, "demo")).split()
    (tree / STAMP).write_text(f"{deps} {build} test\n")
    with open(tree / "setup.py", "a") as f:  # a build change keeps the extra
        f.write("# changed\n")
    out = _dry_run(tree, "demo")
    assert "-e ." in out and "--no-deps" in out and "[demo]" not in out, out
    assert _stamp_written(out).endswith(" test"), out
    with open(tree / "pyproject.toml", "a") as f:  # a dependency change: this mode's extra
        f.write("# changed\n")
    out = _dry_run(tree, "demo")
    assert "-e .[demo]" in out and _stamp_written(out).endswith(" demo"), out
    (tree / "src" / "kcore" / "crc.so").unlink()  # compiled modules gone: build again
    (tree / STAMP).write_text(_stamp_written(out) + "\n")
    assert "-e .[demo]" in _dry_run(tree, "demo")


def test_mode_is_required(tree):
    out = subprocess.run(["/bin/bash", "-c", ". scripts/setup.sh"], cwd=tree,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "demo|test" in out.stdout + out.stderr
