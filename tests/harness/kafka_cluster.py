"""The test harness's Kafka cluster: :class:`pyprod.local_broker.LocalBroker` with more nodes
(``nodes=3``: replication factor 3, min.insync.replicas 2) and the faults tests inflict on them
(stop, kill, pause and restart a node; find a partition's leader or the active controller), the
JVMs' CPU time for the benchmarks, and ``java_command`` for Kafka's Java tools on the broker's
classpath. Node ``i`` has ``node.id=i``, so :meth:`KafkaCluster.leader_of` answers an index
usable with :meth:`stop_node` / :meth:`kill_node` / :meth:`start_node`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time

from pyprod.local_broker import LocalBroker
from pyprod.local_broker.broker import _random_cluster_id
from pyprod.local_broker.jars import ensure_kafka_libs, java_executable
from pyprod.local_broker.processes import terminate

__all__ = ["KafkaCluster", "java_command", "stop_process"]


class KafkaCluster(LocalBroker):
    """``nodes`` Kafka 4.x processes in KRaft combined mode on free 127.0.0.1 ports."""

    def __init__(self, nodes: int = 1, log_dir: str | None = None,
                 broker_props: dict | None = None, *, version: str | None = None,
                 heap: str | None = None, jvm_opts: list[str] | None = None,
                 ports: list[int] | None = None):
        if not isinstance(nodes, int) or not 1 <= nodes <= 9:
            raise ValueError(f"nodes must be an int in 1..9, got {nodes!r}")
        if ports is not None and len(ports) != nodes:
            raise ValueError(f"ports: one client port per node, got {ports!r}")
        self.nodes = nodes
        super().__init__(None, log_dir, broker_props, version=version, heap=heap,
                         jvm_opts=jvm_opts)
        self._want_ports = list(ports or [])

    def cpu_seconds(self, i: int = 0) -> float | None:
        """CPU time (user + system) the node's JVM has used so far; None if not running."""
        p = self._procs[self._check(i)]
        if p is None or p.poll() is not None:
            return None
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def thread_cpu_seconds(self, i: int = 0) -> dict | None:
        """CPU seconds so far of the node's JVM by thread name (e.g. "C2 CompilerThre", as the
        kernel truncates it); None if not running."""
        p = self._procs[self._check(i)]
        if p is None or p.poll() is not None or not hasattr(os, "sysconf"):  # Linux procfs
            return None
        tick, out = os.sysconf("SC_CLK_TCK"), {}
        try:
            tasks = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            return None
        for tid in tasks:
            try:
                with open(f"/proc/{p.pid}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:  # the thread ended
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return out

    def _format(self, cfgs: list[str]) -> None:
        # One StorageTool run (a JVM start) for node 0; the other nodes get a copy of its
        # bootstrap.checkpoint and their own meta.properties, which is all `format` writes.
        super()._format(cfgs)
        src = self._props(0)["log.dirs"]
        for i in range(1, self.nodes):
            dst = self._props(i)["log.dirs"]
            os.makedirs(dst, exist_ok=True)
            shutil.copyfile(os.path.join(src, "bootstrap.checkpoint"),
                            os.path.join(dst, "bootstrap.checkpoint"))
            with open(os.path.join(dst, "meta.properties"), "w") as f:
                f.write(f"node.id={i}\ndirectory.id={_random_cluster_id()}\nversion=1\n"
                        f"cluster.id={self.cluster_id}\n")

    def stop_node(self, i: int, timeout: float = 30.0) -> None:
        """Clean shutdown of node ``i`` (SIGTERM, SIGKILL after ``timeout``); its data stays."""
        terminate(self._procs[self._check(i)], timeout)
        if i == 0:
            self._cds_collect(self._procs[0])
        self._procs[i] = None

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i`` (a crash); its data stays."""
        terminate(self._procs[self._check(i)], kill=True)
        if i == 0:
            self._cds_collect(self._procs[0])
        self._procs[i] = None

    def pause_node(self, i: int) -> None:
        """SIGSTOP node ``i``: it keeps its connections but answers nothing (a hung broker).
        Returns once every thread of the JVM has stopped: SIGSTOP is asynchronous, and a
        request sent meanwhile could still be answered."""
        stop_process(self._procs[self._check(i)].pid)

    def resume_node(self, i: int) -> None:
        os.kill(self._procs[self._check(i)].pid, signal.SIGCONT)

    def start_node(self, i: int, timeout: float = 60.0) -> None:
        """Restart node ``i`` on its old ports and log dirs; wait until it is a live broker."""
        self._launch(self._check(i))
        self.wait_ready([i], timeout=timeout)

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        self.admin().delete_topics([name], operation_timeout=timeout)[name].result(timeout)

    def leader_of(self, topic: str, partition: int, timeout: float = 10.0) -> int:
        """Node index (== node.id) leading ``topic``/``partition``, waiting out elections."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):
                t = self.admin().list_topics(topic, timeout=2).topics[topic]
                leader = t.partitions[partition].leader
                if leader >= 0:
                    return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}/{partition} has no leader after {timeout}s")
            time.sleep(0.05)

    def controller_id(self, timeout: float = 10.0) -> int:
        """Node index of the active KRaft controller (the metadata quorum's leader), read from
        the running nodes' ``quorum-state`` files (the newest epoch wins); waits out elections."""
        deadline = time.monotonic() + timeout
        while True:
            best = (-1, -1)  # (epoch, leader)
            for i in range(self.nodes):
                path = os.path.join(self._props(i)["log.dirs"], "__cluster_metadata-0",
                                    "quorum-state")
                with contextlib.suppress(OSError, ValueError):
                    if self.is_running(i):
                        with open(path) as f:
                            st = json.load(f)
                        best = max(best, (st.get("leaderEpoch", -1), st.get("leaderId", -1)))
            if 0 <= best[1] < self.nodes and self.is_running(best[1]):
                return best[1]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no active controller after {timeout}s (saw {best})")
            time.sleep(0.05)


def java_command(main_class: str, *args: str, heap: str = "256m",
                 version: str | None = None, jvm_opts=()) -> list[str]:
    """argv running ``main_class`` on the cached Kafka classpath, e.g.
    ``java_command("org.apache.kafka.tools.ProducerPerformance", "--topic", t, ...)``.
    Java logging goes through log4j2 with no configuration, i.e. errors only, to stdout."""
    libs = ensure_kafka_libs(version)
    return [java_executable(), f"-Xmx{heap}", "-XX:-UsePerfData", *jvm_opts,
            "-cp", os.path.join(libs, "*"), main_class, *args]


def stop_process(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until all its threads have stopped (POSIX only)."""
    if not hasattr(signal, "SIGSTOP"):
        raise NotImplementedError("pausing a process needs SIGSTOP (POSIX)")
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not _all_threads_stopped(pid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _all_threads_stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is in the stopped state (Linux procfs; elsewhere, after
    a short grace period)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        time.sleep(0.2)
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended
        if state not in ("T", "t"):
            return False
    return True
