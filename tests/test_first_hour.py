"""A new user's first hour: errors that match kafka-python's, the pyprod-broker command, and the
README's commands (each console script answers --help; every documented command exists)."""
import importlib.util
import os
import re
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from pyprod import KafkaProducer, errors
from pyprod.local_broker.processes import free_ports
from tests.harness.readback import read_all_kafka_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- errors --------------------------------------------------------------------------------------

def test_unknown_config_is_a_value_error():
    """kafka-python raises ValueError for an unknown key: `except ValueError` code must work."""
    try:
        KafkaProducer(bootstrap_servers="127.0.0.1:1", no_such_key=1)
    except ValueError as e:
        assert isinstance(e, errors.KafkaConfigurationError)
        assert isinstance(e, errors.KafkaError)
        assert "no_such_key" in str(e)
    else:
        pytest.fail("an unknown config key was accepted")


def _no_brokers(servers: str) -> str:
    with pytest.raises(errors.NoBrokersAvailable) as e:
        KafkaProducer(bootstrap_servers=servers, bootstrap_timeout_ms=1500)
    msg = str(e.value)
    assert msg.startswith(f"NoBrokersAvailable: Unable to bootstrap from {servers}: no broker "
                          "answered a metadata request within 1.5 s (bootstrap_timeout_ms=1500)."
                          " Per address: "), msg
    return msg


def test_no_brokers_available_names_what_was_tried():
    refused, silent = free_ports(2)
    msg = _no_brokers(f"127.0.0.1:{refused}")
    assert re.search(rf"127\.0\.0\.1:{refused}: \d+ connection attempts? failed, last error "
                     r"KafkaConnectionError: .*ECONNREFUSED", msg), msg
    with socket.socket() as server:  # accepts TCP connections but never answers
        server.bind(("127.0.0.1", silent))
        server.listen(8)
        msg = _no_brokers(f"127.0.0.1:{silent}")
    assert msg.endswith(f"127.0.0.1:{silent}: checking api versions"), msg


# -- console scripts and the README --------------------------------------------------------------

def _console_scripts() -> dict:
    """[project.scripts] of pyproject.toml: {name: "module:function"}."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    section = re.search(r"^\[project\.scripts\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', section, re.M))


def _script(name: str) -> str:
    path = os.path.join(os.path.dirname(sys.executable), name)
    assert os.access(path, os.X_OK), f"{name} is not installed: run scripts/setup.sh again"
    return path


def _help(argv) -> str:
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", sorted(_console_scripts()))
def test_console_script_help(name):
    assert _help([_script(name)]).startswith(f"usage: {name}")


def _readme_commands():
    """Each command line of the bash blocks of the README and docs/, continuation lines
    joined."""
    docs = os.path.join(ROOT, "docs")
    blocks = []
    for path in [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md")):
        with open(path) as f:
            blocks += re.findall(r"^```bash\n(.*?)^```", f.read(), re.M | re.S)
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                yield line


def test_readme_commands_exist():
    scripts = _console_scripts()
    demo_help = None
    seen = set()
    for line in _readme_commands():
        words = [w for w in shlex.split(line) if not re.match(r"^[A-Z_]+=", w)]  # env prefix
        cmd, args = words[0], words[1:]
        seen.add(cmd)
        options = [a.split("=")[0] for a in args if a.startswith("--")]
        if cmd in scripts:
            usage = _help([_script(cmd)])
            for opt in options:
                assert opt in usage, f"README: {cmd} {opt} is not an option of {cmd}"
        elif cmd == "bash":
            assert os.path.isfile(os.path.join(ROOT, args[0])), line
            if args[0] == "run-demo.sh":  # its options go to examples/demo.py
                demo_help = demo_help or _help([sys.executable,
                                                os.path.join(ROOT, "examples", "demo.py")])
                for opt in options:
                    assert opt in demo_help, f"README: run-demo.sh {opt} is not a demo option"
        elif cmd.startswith("scripts/"):  # a repository script: it exists, names its options
            with open(os.path.join(ROOT, cmd)) as f:
                text = f.read()
            for opt in options:
                assert opt in text, f"docs: {cmd} {opt} is not an option of {cmd}"
        elif cmd in (".", "source"):
            assert args == [".venv/bin/activate"], line
        elif cmd == "python" and args[0] == "-m":
            assert importlib.util.find_spec(args[1]) is not None, line
        elif cmd == "python":
            assert os.path.isfile(os.path.join(ROOT, args[0])), line
        else:
            assert cmd in ("pip", "cd"), f"README: unknown command {line!r}"
    assert {"bash", "pyprod-broker", "pyprod-perf"} <= seen


# -- pyprod-broker -------------------------------------------------------------------------------

def _jvm_pids(data_dir: str) -> list[int]:
    """Broker JVMs whose command line names data_dir."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"kafka.Kafka" in argv and any(data_dir.encode() in a for a in argv):
            pids.append(int(pid))
    return pids


def _start_broker(port: int, data_dir: str, log):
    proc = subprocess.Popen([_script("pyprod-broker"), "--port", str(port), "--topic",
                             "first-hour:3", "--data-dir", data_dir],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline().strip()  # the bootstrap address, once the broker is ready
    if line != f"127.0.0.1:{port}":
        proc.kill()
        proc.wait()
        log.seek(0)
        pytest.fail(f"pyprod-broker printed {line!r}:\n{log.read()}")
    return proc


def _stop_broker(proc, sig, data_dir: str, log) -> None:
    jvms = _jvm_pids(data_dir)
    assert len(jvms) == 1, jvms
    proc.send_signal(sig)
    assert proc.wait(timeout=120) == 0
    log.seek(0)
    assert "pyprod-broker: stopped" in log.read()
    assert not os.path.exists(f"/proc/{jvms[0]}"), "the broker's JVM outlived pyprod-broker"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pyprod_broker_produce_stop_and_keep_data(tmp_path):
    """Start on a free port, produce with pyprod, Ctrl-C (SIGINT) stops it cleanly; a second run
    on the same --data-dir still has the record and stops on SIGTERM."""
    data_dir = str(tmp_path / "data")
    port = free_ports(1)[0]
    with open(tmp_path / "run1.log", "w+") as log:
        proc = _start_broker(port, data_dir, log)
        try:
            producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
            md = producer.send("first-hour", b"hello", key=b"k").get(timeout=60)
            producer.close()
        except BaseException:
            proc.kill()
            raise
        _stop_broker(proc, signal.SIGINT, data_dir, log)
    with open(tmp_path / "run2.log", "w+") as log:
        proc = _start_broker(port, data_dir, log)
        try:
            records = read_all_kafka_python(f"127.0.0.1:{port}", "first-hour", 1)
        except BaseException:
            proc.kill()
            raise
        _stop_broker(proc, signal.SIGTERM, data_dir, log)
    assert [(r.partition, r.offset, r.key, r.value) for r in records] == \
        [(md.partition, md.offset, b"k", b"hello")]
