"""A local Apache Kafka broker (KRaft, one node in combined broker+controller mode; 4.x, or 3.6+
with ``version=``) on 127.0.0.1, for demos, ``pyprod-perf --embedded`` and ``pyprod-broker``. The jars are jars.py's
(resolved with Maven, cached); the JVM is a child process (processes.py) stopped with this one.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

from .jars import DEFAULT_KAFKA_VERSION, ensure_kafka_libs, java_executable, version_tuple
from .processes import free_ports, live, signal_group, spawn, terminate

__all__ = ["LocalBroker"]


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""

# brokers before 4.0 log through log4j 1 (reload4j)
_LOG4J1 = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
"""


def write_log_config(folder: str, log: str, version: str) -> str:
    """Write the broker's logging configuration for ``version`` into ``folder`` (everything to
    the file ``log``); return the JVM option that points at it."""
    if version_tuple(version) < (4,):
        path = os.path.join(folder, "log4j.properties")
        text, opt = _LOG4J1, "-Dlog4j.configuration=file:{}"
    else:
        path = os.path.join(folder, "log4j2.properties")
        text, opt = _LOG4J2, "-Dlog4j2.configurationFile={}"
    with open(path, "w") as f:
        f.write(text.format(log=log))
    return opt.format(path)


def _random_cluster_id() -> str:
    """A Kafka Uuid in its base64url form; never starting with '-', which the storage
    tool's argument parser would take for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _quiet_logger():
    lg = logging.getLogger("pyprod.local_broker.rdkafka")
    lg.propagate = False
    lg.addHandler(logging.NullHandler())
    return lg


class LocalBroker:
    """Apache Kafka (4.x; ``version=`` 3.6 and up too) in KRaft combined mode on 127.0.0.1: ``port`` for clients (default: a
    free one), data and logs in ``log_dir`` (default: a temp dir, removed by :meth:`stop`).

    ``with LocalBroker() as b: ...`` or ``b = LocalBroker().start(); ...; b.stop()``;
    :meth:`create_topic` needs confluent-kafka (the ``broker`` extra)."""

    nodes = 1  # node i has node.id=i; the repository's test harness runs more
    format_args: tuple = ()  # extra `kafka-storage format` arguments (subclasses: --add-scram)

    def __init__(self, port: int | None = None, log_dir: str | None = None,
                 broker_props: dict | None = None, *, version: str | None = None,
                 heap: str | None = None, jvm_opts: list[str] | None = None):
        self._want_ports = [port] if port else []  # client listener ports (default: free ones)
        self.version = version or os.environ.get("PYPROD_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
        self._own_dir = log_dir is None
        self.log_dir = log_dir  # a temp dir is made by start() when None
        self.broker_props = dict(broker_props or {})
        self.heap = heap or os.environ.get("PYPROD_KAFKA_HEAP") or "512m"
        self.jvm_opts = list(jvm_opts or [])
        self.cluster_id = _random_cluster_id()
        self._procs: list[subprocess.Popen | None] = [None] * self.nodes
        self._ports: list[int] = []
        self._ctl_ports: list[int] = []
        self._libs: str | None = None
        self._admin = None
        self._formatted = False
        self._cds_tmp: str | None = None
        self.startup_seconds: float | None = None

    # -- addresses -----------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` list of all nodes, comma separated."""
        if not self._ports:
            raise RuntimeError("cluster not started")
        return ",".join(f"127.0.0.1:{p}" for p in self._ports)

    def node_bootstrap(self, i: int = 0) -> str:
        return f"127.0.0.1:{self._ports[self._check(i)]}"

    def node_dir(self, i: int = 0) -> str:
        return os.path.join(self.log_dir, f"node-{self._check(i)}")

    def node_log(self, i: int = 0) -> str:
        return os.path.join(self.node_dir(i), "server.log")

    def _check(self, i: int) -> int:
        if not isinstance(i, int) or not 0 <= i < self.nodes:
            raise ValueError(f"node index must be in 0..{self.nodes - 1}, got {i!r}")
        return i

    def is_running(self, i: int = 0) -> bool:
        p = self._procs[self._check(i)]
        return p is not None and p.poll() is None

    # -- configuration ---------------------------------------------------------------------------
    def _props(self, i: int) -> dict:
        n = self.nodes
        rf = min(3, n)
        voters = ",".join(f"{j}@127.0.0.1:{self._ctl_ports[j]}" for j in range(n))
        props = {
            "process.roles": "broker,controller",
            "node.id": i,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self._ports[i]},"
                         f"CONTROLLER://127.0.0.1:{self._ctl_ports[i]}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self._ports[i]}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": os.path.join(self.node_dir(i), "data"),
            "default.replication.factor": rf,
            "min.insync.replicas": 2 if n >= 3 else 1,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min(2, n),
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min(2, n),
            "group.initial.rebalance.delay.ms": 0,
            # small machine, fast failure detection
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.replica.fetchers": 1,
            "background.threads": 2,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 3000,
            "replica.lag.time.max.ms": 10000,
            "controller.quorum.election.timeout.ms": 1000,
            "controller.quorum.fetch.timeout.ms": 2000,
            "leader.imbalance.check.interval.seconds": 5,
            "auto.create.topics.enable": "true",
        }
        props.update(self.broker_props)
        return props

    def _write_config(self, i: int) -> str:
        d = self.node_dir(i)
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "server.properties")
        with open(cfg, "w") as f:
            for k, v in self._props(i).items():
                f.write(f"{k}={v}\n")
        return cfg

    def _java(self, i: int, main: str, *args: str) -> list[str]:
        d = self.node_dir(i)
        return [
            java_executable(), f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError", "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            write_log_config(d, self.node_log(i), self.version), f"-Dkafka.logs.dir={d}",
            *self.jvm_opts,
            "-cp", os.path.join(self._libs, "*"), main, *args,
        ]

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "LocalBroker":
        """Format storage (first time), start every node, wait until all brokers are up."""
        t0 = time.monotonic()
        self._libs = ensure_kafka_libs(self.version)
        if self.log_dir is None or not os.path.isdir(self.log_dir):
            if self._own_dir:
                self.log_dir = tempfile.mkdtemp(prefix="pyprod-kafka-")
        if not self._ports:
            ports = [p for p in free_ports(3 * self.nodes) if p not in self._want_ports]
            self._ports = self._want_ports or ports[: self.nodes]
            self._ctl_ports = ports[-self.nodes:]
        cfgs = [self._write_config(i) for i in range(self.nodes)]
        if not self._formatted:
            self._format(cfgs)
        live.add(self)
        try:
            for i in range(self.nodes):
                self._launch(i)
            self.wait_ready(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        except BaseException:
            self.stop(timeout=5, _keep_dir=True)
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _format(self, cfgs: list[str]) -> None:
        out = os.path.join(self.node_dir(0), "format.log")
        argv = self._java(0, "kafka.tools.StorageTool", "format", "--config", cfgs[0],
                          "--cluster-id", self.cluster_id, "--ignore-formatted",
                          *self.format_args)
        argv[1:3] = ["-Xmx256m", "-XX:TieredStopAtLevel=1"]  # short-lived: fast JIT only
        p = spawn(argv, log_path=out)
        if p.wait(120) != 0:
            with open(out, errors="replace") as f:
                raise RuntimeError(f"kafka storage format failed:\n{f.read()[-3000:]}")
        self._formatted = True

    def _cds_opts(self, i: int) -> list[str]:
        """Class-data sharing: the first node ever started dumps its loaded classes on a
        clean exit; later JVMs map that archive and start faster. PYPROD_KAFKA_CDS=0 disables."""
        if os.environ.get("PYPROD_KAFKA_CDS", "1") == "0":
            return []
        jsa = os.path.join(os.path.dirname(self._libs), "kafka-server.jsa")
        if os.path.exists(jsa):
            return [f"-XX:SharedArchiveFile={jsa}", "-Xshare:auto"]
        if i == 0 and self._cds_tmp is None:
            self._cds_tmp = f"{jsa}.{os.getpid()}.{id(self)}.tmp"
            return [f"-XX:ArchiveClassesAtExit={self._cds_tmp}"]
        return []

    def _cds_collect(self, proc) -> None:
        tmp, self._cds_tmp = self._cds_tmp, None
        if not tmp or not os.path.exists(tmp):
            return
        with contextlib.suppress(OSError):
            if proc is not None and proc.returncode in (0, 143):  # exited, not SIGKILLed
                os.replace(tmp, tmp.rsplit(".", 3)[0])
            else:
                os.unlink(tmp)

    def _launch(self, i: int) -> None:
        if self.is_running(i):
            return
        cfg = os.path.join(self.node_dir(i), "server.properties")
        argv = self._java(i, "kafka.Kafka", cfg)
        argv[1:1] = self._cds_opts(i)
        self._procs[i] = spawn(argv, log_path=os.path.join(self.node_dir(i), "stdout.log"))

    def _check_alive(self, nodes) -> None:
        for i in nodes:
            p = self._procs[i]
            if p is None or p.poll() is not None:
                code = None if p is None else p.returncode
                raise RuntimeError(f"kafka node {i} exited (code {code}) during startup\n"
                                   + self.log_tail(60, node=i))

    def wait_ready(self, nodes=None, timeout: float = 60.0) -> None:
        """Wait until ``nodes`` (default: all) are registered, unfenced brokers and every
        partition with a replica on a live broker has a leader."""
        want = set(range(self.nodes) if nodes is None else nodes)
        deadline = time.monotonic() + timeout
        # 1. listeners accept connections
        for i in sorted(want):
            while True:
                self._check_alive([i])
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", self._ports[i]), 0.5).close()
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kafka node {i} never listened\n" + self.log_tail(40, node=i))
                time.sleep(0.1)
        # 2. the cluster metadata lists them as live brokers
        last = None
        while True:
            self._check_alive(want)
            try:
                md = self.admin().list_topics(timeout=2)
                last = set(md.brokers)
                if want <= last:
                    # after a restart, partitions with a live replica get their leader a
                    # moment after the broker is unfenced
                    waiting = [f"{t.topic}/{p.id}" for t in md.topics.values()
                               for p in t.partitions.values()
                               if p.leader < 0 and set(p.replicas) & last]
                    if not waiting:
                        return
                    last = f"brokers {sorted(last)}, leaderless {waiting[:5]}"
            except Exception as e:  # noqa: BLE001 - retried until the deadline
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers {sorted(want)} not all live (saw {last!r})\n"
                                   + self.log_tail(40))
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0, *, kill: bool = False, _keep_dir: bool = False) -> None:
        """Stop every node: SIGTERM to all at once (SIGKILL if ``kill``), SIGKILL to those
        still up after ``timeout``. Removes the log dir if the cluster made it (unless
        PYPROD_KEEP_KAFKA_LOGS is set)."""
        self._close_admin()
        procs = [p for p in self._procs if p is not None]
        for p in procs:
            if p.poll() is None:
                signal_group(p, kill=kill)
        deadline = time.monotonic() + timeout
        for p in procs:
            terminate(p, max(0.1, deadline - time.monotonic()))
        self._cds_collect(self._procs[0])
        self._procs = [None] * self.nodes
        live.discard(self)
        if (self._own_dir and self.log_dir and not _keep_dir
                and not os.environ.get("PYPROD_KEEP_KAFKA_LOGS")):
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self._formatted = False  # a later start() formats afresh

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- admin -----------------------------------------------------------------------------------
    def admin(self):
        """A cached confluent-kafka AdminClient for this cluster."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers,
                                       "logger": _quiet_logger(),
                                       "reconnect.backoff.max.ms": 500})
        return self._admin

    def _close_admin(self) -> None:
        self._admin = None  # librdkafka closes the handle when collected

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: dict | None = None, timeout: float = 30.0) -> str:
        """Create ``name`` and wait until every partition has a leader and a full ISR."""
        from confluent_kafka.admin import NewTopic

        if not isinstance(name, str) or not name:
            raise ValueError("topic name must be a non-empty str")
        rf = min(3, self.nodes) if replication_factor is None else replication_factor
        nt = NewTopic(name, num_partitions=partitions, replication_factor=rf,
                      config={k: str(v) for k, v in (configs or {}).items()})
        fut = self.admin().create_topics([nt], operation_timeout=timeout,
                                         request_timeout=timeout)[name]
        fut.result(timeout)
        self.wait_topic(name, partitions, rf, timeout)
        return name

    def wait_topic(self, name: str, partitions: int, rf: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):
                t = self.admin().list_topics(name, timeout=2).topics.get(name)
                if t is not None and t.error is None and len(t.partitions) == partitions and all(
                        p.leader >= 0 and len(p.isrs) >= rf for p in t.partitions.values()):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} not ready after {timeout}s")
            time.sleep(0.05)

    # -- logs ------------------------------------------------------------------------------------
    def log_tail(self, n: int = 50, node: int | None = None) -> str:
        """Last ``n`` lines of each node's server.log (and of its stdout, if non-empty)."""
        out = []
        if self.log_dir is None:
            return ""
        for i in range(self.nodes) if node is None else [self._check(node)]:
            for name in ("server.log", "stdout.log", "format.log"):
                path = os.path.join(self.node_dir(i), name)
                try:
                    with open(path, "rb") as f:
                        f.seek(0, os.SEEK_END)
                        f.seek(max(0, f.tell() - 200 * n))
                        lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
                except OSError:
                    continue
                if lines and (name == "server.log" or any(s.strip() for s in lines)):
                    out.append(f"----- node {i} {name} (last {len(lines)} lines) -----")
                    out.extend(lines)
        return "\n".join(out)

    def __repr__(self) -> str:
        state = self.bootstrap_servers if self._ports else "not started"
        return f"<{type(self).__name__} {self.version} nodes={self.nodes} {state}>"

