"""Apache Kafka before KRaft: one broker in ZooKeeper mode (0.11 to 3.x) with its own ZooKeeper,
both from the broker's Maven jars (the ``zookeeper`` jar its pom depends on, run as
``ZooKeeperServerMain`` on a free 127.0.0.1 port). :class:`ZkKafkaCluster` is a one-node
:class:`~tests.harness.kafka_cluster.KafkaCluster` (``bootstrap_servers``, ``admin()``,
``create_topic()``, ``stop_node``/``start_node`` of the broker work as usual); ``scram_users``
adds a SASL_PLAINTEXT listener (on ``sasl_port``) taking SCRAM-SHA-256 for those users, whose
credentials go into ZooKeeper with ``kafka.admin.ConfigCommand --zookeeper`` once the broker is up
(start() returns when they authenticate)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time

from pyprod.local_broker.broker import write_log_config
from pyprod.local_broker.jars import ensure_kafka_libs, java_executable
from pyprod.local_broker.processes import free_ports, spawn, terminate

from .kafka_cluster import KafkaCluster

__all__ = ["ZkKafkaCluster", "wait_port"]

_JAAS = """KafkaServer {
  org.apache.kafka.common.security.scram.ScramLoginModule required;
};
"""


def wait_port(port: int, deadline: float, proc: subprocess.Popen, what: str, log: str) -> None:
    """Wait until 127.0.0.1:``port`` accepts a connection; RuntimeError with ``log``'s tail if
    ``proc`` exits first, TimeoutError after ``deadline`` (time.monotonic())."""
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited (code {proc.returncode})\n{_tail(log)}")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} never listened on {port}\n{_tail(log)}")
        time.sleep(0.1)


def _tail(path: str, n: int = 40) -> str:
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().splitlines()[-n:])
    except OSError:
        return ""


class ZkKafkaCluster(KafkaCluster):
    """One ZooKeeper-mode Kafka broker (``broker.id=0``) plus a ZooKeeper, on 127.0.0.1."""

    def __init__(self, version: str, *, scram_users: dict | None = None,
                 broker_props: dict | None = None, heap: str | None = None,
                 jvm_opts: list[str] | None = None, java: str | None = None):
        super().__init__(1, None, broker_props, version=version, heap=heap, jvm_opts=jvm_opts)
        self.scram_users = dict(scram_users or {})
        self.java = java  # a java executable for this version (default: java_executable())
        self._base_jvm_opts = list(self.jvm_opts)
        self.zk_port: int | None = None
        self.sasl_port: int | None = None
        self._zk: subprocess.Popen | None = None
        self._users_added = False

    def _zk_dir(self) -> str:
        return os.path.join(self.log_dir, "zookeeper")

    # -- configuration ---------------------------------------------------------------------------
    def _props(self, i: int) -> dict:
        listeners = f"PLAINTEXT://127.0.0.1:{self._ports[0]}"
        if self.scram_users:
            listeners += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        props = {
            "broker.id": 0,
            "zookeeper.connect": f"127.0.0.1:{self.zk_port}",
            "zookeeper.connection.timeout.ms": 30000,
            "listeners": listeners,
            "advertised.listeners": listeners,
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "log.dirs": os.path.join(self.node_dir(0), "data"),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "background.threads": 2,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
            "auto.create.topics.enable": "true",
        }
        props.update(self.broker_props)
        return props

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        argv = super()._java(i, main, *args)
        if self.java:
            argv[0] = self.java
        return argv

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> "ZkKafkaCluster":
        t0 = time.monotonic()
        if self.log_dir is None or not os.path.isdir(self.log_dir):
            if self._own_dir:
                self.log_dir = tempfile.mkdtemp(prefix="pyprod-kafka-")
        if not self._ports:  # one draw: client, (unused) controller, ZooKeeper, SASL
            ports = free_ports(4)
            self._ports, self._ctl_ports = ports[:1], ports[1:2]
            self.zk_port, self.sasl_port = ports[2], ports[3]
        os.makedirs(self.node_dir(0), exist_ok=True)
        jaas = os.path.join(self.node_dir(0), "kafka_server_jaas.conf")
        with open(jaas, "w") as f:
            f.write(_JAAS)
        self.jvm_opts = self._base_jvm_opts + [f"-Djava.security.auth.login.config={jaas}",
                                               "-Dzookeeper.sasl.client=false"]
        try:
            self._libs = ensure_kafka_libs(self.version)
            self._start_zookeeper(timeout)
            super().start(max(10.0, timeout - (time.monotonic() - t0)))
            if not self._users_added:
                self._add_scram_users(time.monotonic() + max(10.0, timeout))
            return self
        except BaseException:
            self.stop(timeout=5, _keep_dir=True)
            raise

    def _start_zookeeper(self, timeout: float) -> None:
        if self._zk is not None and self._zk.poll() is None:
            return
        d = self._zk_dir()
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        cfg = os.path.join(d, "zookeeper.properties")
        with open(cfg, "w") as f:
            f.write(f"dataDir={os.path.join(d, 'data')}\nclientPort={self.zk_port}\n"
                    "clientPortAddress=127.0.0.1\ntickTime=500\nmaxClientCnxns=0\n"
                    "admin.enableServer=false\n")
        log = os.path.join(d, "zookeeper.log")
        argv = [self.java or java_executable(), "-Xmx128m", "-XX:-UsePerfData",
                "-XX:TieredStopAtLevel=1", write_log_config(d, log, self.version),
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.jmx.log4j.disable=true", "-cp", os.path.join(self._libs, "*"),
                "org.apache.zookeeper.server.ZooKeeperServerMain", cfg]
        self._zk = spawn(argv, log_path=os.path.join(d, "stdout.log"))
        wait_port(self.zk_port, time.monotonic() + timeout, self._zk, "ZooKeeper", log)

    def _format(self, cfgs: list[str]) -> None:
        self._formatted = True  # no storage to format in ZooKeeper mode
        self._users_added = False

    def _add_scram_users(self, deadline: float) -> None:
        """Put the SCRAM users into ZooKeeper (once the broker made /config/changes, which
        0.11's ConfigCommand needs) and wait until the broker has them."""
        for name, password in self.scram_users.items():
            self._config_command("--alter", "--entity-type", "users", "--entity-name", name,
                                 "--add-config",
                                 f"SCRAM-SHA-256=[iterations=4096,password={password}]")
        from confluent_kafka.admin import AdminClient
        for name, password in self.scram_users.items():
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
                                 "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": name,
                                 "sasl.password": password, "reconnect.backoff.max.ms": 200})
            while True:
                try:
                    admin.list_topics(timeout=2)
                    break
                except Exception:  # noqa: BLE001 - authentication fails until it has the user
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"SCRAM user {name!r} never authenticated\n"
                                           + self.log_tail(30))
        self._users_added = True

    def _config_command(self, *args: str) -> None:
        self._admin_tool("kafka.admin.ConfigCommand", "--zookeeper", f"127.0.0.1:{self.zk_port}",
                         *args)

    def acl_command(self, *args: str) -> None:
        """``kafka.admin.AclCommand`` against this broker's ZooKeeper (``--add ...``); needs an
        ``authorizer.class.name`` in ``broker_props``."""
        self._admin_tool("kafka.admin.AclCommand", "--authorizer-properties",
                         f"zookeeper.connect=127.0.0.1:{self.zk_port}", *args)

    def _admin_tool(self, main: str, *args: str) -> None:
        out = os.path.join(self._zk_dir(), main.rsplit(".", 1)[-1] + ".log")
        argv = self._java(0, main, *args)
        argv[1:3] = ["-Xmx256m", "-XX:TieredStopAtLevel=1"]  # short-lived: fast JIT only
        p = spawn(argv, log_path=out)
        code = p.wait(120)
        if code != 0 or "Error while executing" in _tail(out):  # 0.11 exits 0 on errors
            raise RuntimeError(f"{main} {args[:5]} failed:\n{_tail(out)}")

    def stop(self, timeout: float = 20.0, *, kill: bool = False, _keep_dir: bool = False) -> None:
        """Stop the broker, then ZooKeeper."""
        zk, self._zk = self._zk, None
        if zk is not None:
            # the broker first: it deregisters from ZooKeeper on a clean shutdown
            procs = [p for p in self._procs if p is not None]
            for p in procs:
                terminate(p, timeout, kill=kill)
            terminate(zk, 10, kill=True)
        super().stop(timeout, kill=kill, _keep_dir=_keep_dir)

    def log_tail(self, n: int = 50, node: int | None = None) -> str:
        tail = super().log_tail(n, node)
        zk = _tail(os.path.join(self._zk_dir(), "zookeeper.log"), 10) if self.log_dir else ""
        return tail + (f"\n----- ZooKeeper log (last lines) -----\n{zk}" if zk else "")
