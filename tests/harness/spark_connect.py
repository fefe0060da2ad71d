"""A Spark Connect server from pyspark's own jars (spark-connect_2.13-*.jar), as a child
process on 127.0.0.1, and pytest fixtures for it.

SparkConnectServer   spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer
                     (local[2], a free gRPC port, a small driver heap); its Python workers run
                     sys.executable with this checkout's src on PYTHONPATH, so they import the
                     same pyprod as the tests. start() waits until the port accepts connections
                     and a query answers; stop() SIGTERMs it (SIGKILL after a deadline).
spark_connect_server the started server, session-scoped (its log tail joins a failure report)
spark_connect        a SparkSession.builder.remote("sc://127.0.0.1:<port>") session on it

The Connect client needs grpcio, grpcio-status, googleapis-common-protos and zstandard (the
test extra); their absence is a failure with pyspark's message, not a skip.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time

import pytest

from pyprod.local_broker.processes import free_ports, live, spawn, terminate

__all__ = ["SparkConnectServer", "spark_connect_server", "spark_connect",
           "connect_mode", "CONNECT_CLASS"]

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_MODE_VAR = "SPARK_CONNECT_MODE_ENABLED"  # pyspark's switch: functions build Connect columns


def _pyspark_home() -> str:
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _src_dir() -> str:
    import pyprod
    return os.path.dirname(os.path.dirname(os.path.abspath(pyprod.__file__)))


class SparkConnectServer:
    """One Spark Connect server (local mode) on a free 127.0.0.1 port."""

    def __init__(self, *, master: str = "local[2]", driver_memory: str = "640m",
                 conf: dict | None = None, log_dir: str | None = None):
        self.master = master
        self.driver_memory = driver_memory
        self.conf = dict(conf or {})
        self._own_dir = log_dir is None
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="pyprod-spark-connect-")
        self.port: int | None = None
        self._proc = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("Spark Connect server not started")
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.log_dir, "spark-connect.log")

    def _env(self) -> dict:
        env = dict(os.environ)
        for k in ("SPARK_REMOTE", _MODE_VAR, "SPARK_API_MODE", "SPARK_HOME", "SPARK_CONF_DIR"):
            env.pop(k, None)  # the server is classic Spark, with pyspark's own jars and conf
        paths = [_src_dir()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env.update(PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
                   PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_CONNECT_MODE="0",
                   PYARROW_IGNORE_TIMEZONE="1")
        return env

    def _argv(self) -> list:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": os.path.join(self.log_dir, "warehouse"),
            "spark.local.dir": os.path.join(self.log_dir, "local"),
            "spark.python.worker.reuse": "true",
            "spark.python.worker.faulthandler.enabled": "true",
            "spark.sql.pyspark.worker.logging.enabled": "true",
            "spark.log.level": "WARN",  # the log tail in a failure report: warnings, errors
            **self.conf,
        }
        spark_submit = os.path.join(_pyspark_home(), "bin", "spark-submit")
        argv = [spark_submit, "--class", CONNECT_CLASS, "--name", "pyprod-spark-connect",
                "--master", self.master, "--driver-memory", self.driver_memory]
        for k, v in conf.items():
            argv += ["--conf", f"{k}={v}"]
        return argv

    def start(self, timeout: float = 240.0) -> "SparkConnectServer":
        """Start the server; return once a remote session's query answers."""
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise RuntimeError("Spark Connect needs Java: no java on PATH, no JAVA_HOME")
        t0 = time.monotonic()
        self.port = free_ports(1)[0]
        self._proc = spawn(self._argv(), log_path=self.log_path, env=self._env(),
                           cwd=self.log_dir)
        live.add(self)
        deadline = t0 + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise RuntimeError(f"Spark Connect server exited with {code}\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"Spark Connect server never listened on {self.port} "
                                   f"within {timeout:.0f}s\n{self.log_tail()}")
            time.sleep(0.2)
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (Spark's shutdown hooks stop the context); SIGKILL after ``timeout``."""
        terminate(self._proc, timeout)
        self._proc = None
        live.discard(self)
        if self._own_dir and not os.environ.get("PYPROD_KEEP_KAFKA_LOGS"):
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def session(self):
        """A new remote SparkSession on this server (pyspark.sql.connect.session)."""
        with connect_mode():
            # the Connect client's builder itself: pyspark.sql's refuses remote() while a
            # classic session runs in this process (tests/spark's)
            from pyspark.sql.connect.session import SparkSession
            return SparkSession.builder.remote(self.url).getOrCreate()

    def log_tail(self, n: int = 60) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 400 * n))
                lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
        except OSError:
            return ""
        return "\n".join([f"----- spark connect log (last {len(lines)} lines) -----", *lines])

    def __enter__(self) -> "SparkConnectServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<SparkConnectServer {self.url if self.port else 'not started'}>"


@contextlib.contextmanager
def connect_mode():
    """pyspark's Connect mode switch (os.environ[SPARK_CONNECT_MODE_ENABLED], which
    builder.remote() sets for good) on for the block only: with it, pyspark.sql.functions
    build Connect columns; a classic session in the same process (tests/spark) needs it off."""
    before = os.environ.get(_MODE_VAR)
    os.environ[_MODE_VAR] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_MODE_VAR, None)
        else:
            os.environ[_MODE_VAR] = before


def _check_client():
    try:
        from pyspark.sql.connect.utils import check_dependencies
        check_dependencies()
    except ImportError as e:  # pragma: no cover - the failure is the point
        pytest.fail("the Spark Connect client's packages are missing (pip install "
                    "'.[test]'): %s" % (e,))


@pytest.fixture(scope="session")
def spark_connect_server():
    _check_client()
    server = SparkConnectServer()
    try:
        server.start()
    except (RuntimeError, TimeoutError) as e:
        pytest.fail(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark_connect(spark_connect_server):
    """A remote session; the first query waits out the server's warm-up."""
    session = spark_connect_server.session()
    with connect_mode():
        assert session.range(3).count() == 3
    yield session
    with connect_mode():
        session.stop()
