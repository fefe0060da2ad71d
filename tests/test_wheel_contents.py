"""What the wheel ships (issue 42): pyprod and kcore, with one local broker for users
(pyprod.local_broker: LocalBroker, pyprod-broker, pyprod-perf --embedded) and no test plumbing:
no tests/harness code, no pyprod.testing, no function only the tests call. One pure wheel is
built from a copy of the tree (as test_packaging's) and read, then imported on its own."""
import ast
import os
import subprocess
import sys
import zipfile

import pytest

from tests.test_packaging import _copy_tree, _env

LOCAL_BROKER = {"__init__.py", "broker.py", "cli.py", "jars.py", "processes.py", "pom.xml"}
# the test harness's own functions (tests/harness/kafka_cluster.py): node faults, Java tools
HARNESS_ONLY = {"stop_process", "java_command", "stop_node", "kill_node", "pause_node",
                "resume_node", "start_node", "leader_of", "controller_id", "thread_cpu_seconds"}
TEST_MODULES = {"tests", "pytest", "hypothesis", "conftest"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """(names, {path: text of each .py}, unpacked dir) of a pure wheel of this tree."""
    tmp = tmp_path_factory.mktemp("wheel")
    tree, dist = _copy_tree(tmp / "tree"), tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(dist), str(tree)],
                   check=True, env=_env(PYPROD_NO_EXTENSIONS="1"), cwd=tmp)
    (whl,) = os.listdir(dist)
    with zipfile.ZipFile(dist / whl) as z:
        names = z.namelist()
        sources = {n: z.read(n).decode() for n in names if n.endswith(".py")}
        z.extractall(tmp / "site")
    return names, sources, tmp / "site"


def test_only_pyprod_and_kcore_and_one_local_broker(wheel):
    names, _, _ = wheel
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"pyprod", "kcore"}
    assert not [n for n in names if set(n.split("/")) & {"testing", "tests", "harness"}]
    broker = {n.split("/", 2)[2] for n in names if n.startswith("pyprod/local_broker/")}
    assert broker == LOCAL_BROKER


def test_no_module_imports_or_defines_test_plumbing(wheel):
    _, sources, _ = wheel
    imports, defined = {}, {}
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text, path)):
            if isinstance(node, ast.Import):
                for a in node.names:
                    imports.setdefault(a.name.split(".")[0], []).append(path)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imports.setdefault(node.module.split(".")[0], []).append(path)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(path)
    assert not {m: imports[m] for m in TEST_MODULES & set(imports)}
    assert not {f: defined[f] for f in HARNESS_ONLY & set(defined)}


def test_console_scripts_point_into_the_wheel(wheel):
    names, _, site = wheel
    (ep,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = dict(line.replace(" ", "").split("=", 1)
                   for line in (site / ep).read_text().splitlines() if "=" in line)
    assert scripts["pyprod-broker"] == "pyprod.local_broker.cli:main"
    for target in scripts.values():
        assert target.split(":")[0].replace(".", "/") + ".py" in names


def test_the_unpacked_wheel_imports_its_broker_alone(wheel, tmp_path):
    """With only the wheel on the path (no checkout): the broker's modules import, and
    pyprod.testing no longer exists."""
    _, _, site = wheel
    code = ("import sys, pyprod.local_broker as b, pyprod.local_broker.cli, pyprod.perf\n"
            "assert b.__file__.startswith(sys.argv[1]), b.__file__\n"
            "print(sorted(b.__all__))\n"
            "try:\n    import pyprod.testing\nexcept ModuleNotFoundError:\n    print('gone')\n")
    out = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(PYTHONPATH=str(site)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [
        "['DEFAULT_KAFKA_VERSION', 'KafkaLibsUnavailable', 'LocalBroker']", "gone"]
