"""A rotation of broker faults applied to a running :class:`KafkaCluster`, on its own thread.

Kinds (applied in the order of ``kinds``, round robin):

kill_leader      SIGKILL the leader of one of the topic's partitions (a crash), restart it
pause            SIGSTOP the leader of a partition for ``pause_s``, then SIGCONT (a hung broker:
                 connections stay open, nothing is answered; past broker.session.timeout.ms the
                 controller fences it and its partitions get new leaders)
restart          graceful restart (SIGTERM: controlled shutdown) of a partition leader
kill_controller  SIGKILL the active KRaft controller (the metadata quorum's leader), restart it

After each fault the injector waits until every node is a live broker again and every partition
of the topic has a leader and an ISR of at least ``min_isr``, then ``gap_s``, then the next one.
Each fault is logged as a :class:`Fault` (kind, node, when, how long recovery took).

A producer spreads its records over the faults with :meth:`FaultInjector.paced`, which yields
ranges of record indexes no faster than the faults progress::

    inj = FaultInjector(cluster, topic, faults=20, seed=7)
    inj.start()
    for lo, hi in inj.paced(200_000):
        for i in range(lo, hi):
            producer.send(...)
    inj.finish()        # joins, heals any node left down, re-raises the thread's error
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from dataclasses import asdict, dataclass

__all__ = ["Fault", "FaultInjector", "KINDS"]

KINDS = ("kill_leader", "pause", "restart", "kill_controller")

log = logging.getLogger("tests.harness.faults")


@dataclass
class Fault:
    index: int
    kind: str
    node: int
    target: str  # what made this node the victim, e.g. "leader of t/3" or "controller"
    t: float  # seconds since the injector started, when the fault hit
    down_s: float  # how long the node was dead / stopped
    recovered_s: float  # from the fault until the cluster was whole again

    def as_dict(self) -> dict:
        return asdict(self)


class FaultInjector(threading.Thread):
    """Applies ``faults`` faults of ``kinds`` to ``cluster`` while a producer writes ``topic``."""

    def __init__(self, cluster, topic: str, *, faults: int = 20, kinds=KINDS,
                 pause_s: float = 3.0, down_s: float = 0.5, gap_s: float = 0.5,
                 first_after_s: float = 1.0, min_isr: int = 2, seed: int | None = None,
                 recover_timeout: float = 120.0, estimate_s: float = 6.0):
        super().__init__(name="fault-injector", daemon=True)
        unknown = set(kinds) - set(KINDS)
        if unknown or not kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {kinds!r}")
        self.cluster, self.topic = cluster, topic
        self.total, self.kinds = faults, tuple(kinds)
        self.pause_s, self.down_s, self.gap_s = pause_s, down_s, gap_s
        self.first_after_s, self.min_isr = first_after_s, min_isr
        self.seed = random.randrange(1 << 32) if seed is None else seed
        self.rng = random.Random(self.seed)
        self.recover_timeout = recover_timeout
        self.estimate_s = estimate_s  # a fault's duration guessed before one was measured
        self.log: list[Fault] = []
        self.paced_until = None  # seconds since start when paced() handed out its last range
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._t0 = None
        self._current_start = None
        self._paused: set[int] = set()
        self._down: set[int] = set()
        self._lock = threading.Lock()

    # -- the thread --------------------------------------------------------------------------------
    def start(self) -> None:
        self._t0 = time.monotonic()
        super().start()

    def run(self) -> None:
        try:
            self._halt.wait(self.first_after_s)
            partitions = self._partitions()
            for k in range(self.total):
                if self._halt.is_set():
                    break
                self._current_start = time.monotonic()
                kind = self.kinds[k % len(self.kinds)]
                fault = self._apply(k, kind, self.rng.choice(partitions))
                self._recover()
                fault.recovered_s = round(time.monotonic() - self._current_start, 3)
                with self._lock:
                    self.log.append(fault)
                log.info("fault %d/%d %s node %d (%s) at %.1fs: recovered in %.1fs", k + 1,
                         self.total, kind, fault.node, fault.target, fault.t, fault.recovered_s)
                self._halt.wait(self.gap_s)
        except BaseException as e:  # noqa: BLE001 - re-raised by finish()
            self.error = e
            log.exception("fault injector failed")
        finally:
            self._current_start = None
            with contextlib.suppress(Exception):
                self.heal()

    def _partitions(self) -> list[int]:
        deadline = time.monotonic() + self.recover_timeout
        while True:
            with contextlib.suppress(Exception):
                md = self.cluster.admin().list_topics(self.topic, timeout=5).topics[self.topic]
                if md.error is None and md.partitions:
                    return sorted(md.partitions)
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {self.topic!r} not in the metadata")
            time.sleep(0.2)

    def _apply(self, k: int, kind: str, partition: int) -> Fault:
        c = self.cluster
        if kind == "kill_controller":
            node, target = c.controller_id(timeout=self.recover_timeout), "controller"
        else:
            node = c.leader_of(self.topic, partition, timeout=self.recover_timeout)
            target = f"leader of {self.topic}/{partition}"
        t = round(time.monotonic() - self._t0, 3)
        t_down = time.monotonic()
        if kind == "pause":
            self._paused.add(node)
            c.pause_node(node)
            self._halt.wait(self.pause_s)
            c.resume_node(node)
            self._paused.discard(node)
        else:
            self._down.add(node)
            if kind == "restart":
                c.stop_node(node)
            else:
                c.kill_node(node)
            self._halt.wait(self.down_s)
            c.start_node(node, timeout=self.recover_timeout)
            self._down.discard(node)
        down = round(time.monotonic() - t_down, 3)
        return Fault(k, kind, node, target, t, down, 0.0)

    def _recover(self) -> None:
        """Every node a live broker, every partition led with an ISR of >= min_isr."""
        c = self.cluster
        c.wait_ready(timeout=self.recover_timeout)
        deadline = time.monotonic() + self.recover_timeout
        last = None
        while True:
            with contextlib.suppress(Exception):
                md = c.admin().list_topics(self.topic, timeout=5).topics[self.topic]
                last = {p.id: (p.leader, sorted(p.isrs)) for p in md.partitions.values()}
                if md.error is None and last and all(
                        leader >= 0 and len(isr) >= self.min_isr for leader, isr in last.values()):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic}: ISR not back to {self.min_isr} after "
                                   f"{self.recover_timeout}s (leader, isr): {last}")
            time.sleep(0.1)

    # -- the caller's side -------------------------------------------------------------------------
    def progress(self) -> float:
        """Fraction of the rotation done, 0..1, interpolated within the running fault from the
        mean duration of the finished ones."""
        if not self.is_alive():
            return 1.0 if self._t0 is not None else 0.0
        with self._lock:
            done = len(self.log)
            spent = sum(f.recovered_s for f in self.log) + self.gap_s * done
        est = spent / done if done else self.estimate_s
        start = self._current_start
        within = 0.0 if start is None else min(0.95, (time.monotonic() - start) / max(est, 0.1))
        return min(1.0, (done + within) / max(1, self.total))

    def paced(self, n: int, chunk: int = 200, poll_s: float = 0.01):
        """Yield ``(lo, hi)`` index ranges covering ``range(n)``, each no earlier than the
        rotation has reached ``lo / n`` of its faults, so the records span all of them."""
        for lo in range(0, n, chunk):
            while self.progress() < lo / n:
                time.sleep(poll_s)
            yield lo, min(n, lo + chunk)
        self.paced_until = time.monotonic() - self._t0

    def finish(self, timeout: float | None = None) -> list[Fault]:
        """Wait for the rotation to end (all faults and recoveries), heal; re-raise its error."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"fault injector still running after {timeout}s")
        self.heal()
        if self.error is not None:
            raise self.error
        return self.faults

    def stop(self, timeout: float | None = None) -> None:
        """End the rotation early (after the running fault), heal, do not raise."""
        self._halt.set()
        if self.is_alive():
            self.join(timeout)
        with contextlib.suppress(Exception):
            self.heal()

    def heal(self) -> None:
        """Resume any paused node, start any node left down, wait until all are live."""
        c = self.cluster
        for i in list(self._paused):
            with contextlib.suppress(Exception):
                c.resume_node(i)
            self._paused.discard(i)
        for i in range(c.nodes):
            if not c.is_running(i):
                c.start_node(i, timeout=self.recover_timeout)
            self._down.discard(i)

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self.log)

    def summary(self) -> dict:
        """{"applied": n, "by_kind": {kind: n}, "nodes": {node: n}, "seed": seed}"""
        faults = self.faults
        by_kind, nodes = {}, {}
        for f in faults:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
            nodes[f.node] = nodes.get(f.node, 0) + 1
        return {"applied": len(faults), "by_kind": by_kind, "nodes": dict(sorted(nodes.items())),
                "seed": self.seed}
