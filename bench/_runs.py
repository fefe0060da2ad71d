"""compare.py's parent side: child processes measured through wait4, the Java tool, the broker of
a run and one measured run on its own topic."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from _clients import _chunks
from _workloads import PARTITIONS

HERE = os.path.dirname(os.path.abspath(__file__))
COMPARE = os.path.join(HERE, "compare.py")

def machine_cpu_s():
    """(busy, steal) CPU seconds of the whole machine so far, from /proc/stat; None off Linux.
    A run's busy time less its client's and broker's is what other processes took meanwhile:
    the sign of a loaded machine, whose figures do not carry over to a quiet one."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / tick, fields[7] / tick


class MachineLoad:
    """One run's share of the machine: made as the run starts; result(client_cpu_s) gives the
    broker's CPU seconds meanwhile, the machine's steal, the run's length, and other_cpu_s:
    the machine's busy time less the client's and the broker's."""

    def __init__(self, broker):
        self.broker, self.broker_cpu = broker, broker.cpu_s()
        self.machine, self.started = machine_cpu_s(), time.monotonic()

    def result(self, client_cpu_s):
        out = {}
        if self.broker_cpu is not None and self.broker.cpu_s() is not None:
            out["broker_cpu_s"] = self.broker.cpu_s() - self.broker_cpu
        if self.machine is not None:
            busy, steal = (b - a for a, b in zip(self.machine, machine_cpu_s()))
            out["steal_s"] = round(steal, 2)
            out["run_s"] = round(time.monotonic() - self.started, 2)
            out["other_cpu_s"] = round(busy - client_cpu_s - out.get("broker_cpu_s", 0), 2)
        return out


def run_measured(cmd, timeout, rss_every=None):
    """Run ``cmd``; stdout, stderr, exit code, CPU and peak RSS from its rusage (wait4), and
    with ``rss_every`` (s) a [(seconds, RSS MiB)] timeline read from /proc meanwhile."""
    timeline = []
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL)
        start = time.monotonic()
        next_rss = start
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if now - start > timeout:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            if rss_every and now >= next_rss:
                rss = _rss_mib(proc.pid)
                if rss is not None:
                    timeline.append((round(now - start, 3), rss))
                next_rss = now + rss_every
            time.sleep(min(0.02, rss_every or 0.02))
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        return {"stdout": fo.read().decode(errors="replace"),
                "stderr": fe.read().decode(errors="replace"),
                "rc": proc.returncode, "cpu_s": ru.ru_utime + ru.ru_stime,
                "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "rss_timeline": timeline,
                "timed_out": time.monotonic() - start > timeout}


def run_child(script: str, spec: dict, what: str, records: int, env=None) -> dict:
    """``python -X faulthandler SCRIPT --child SPEC`` (a crash prints its threads' stacks); its
    last JSON line on stdout, or RuntimeError saying how it ended. env: variables to set in
    the child beside this process's."""
    cmd = [sys.executable, "-X", "faulthandler", script, "--child", json.dumps(spec)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120 + records / 5_000,
                         env=None if env is None else dict(os.environ, **env))
    lines = [s for s in out.stdout.splitlines() if s.startswith("{")]
    if out.returncode or not lines:
        how = f"died of {signal.Signals(-out.returncode).name}" if out.returncode < 0 \
            else f"exit {out.returncode}"
        raise RuntimeError(f"{what}: the run failed ({how}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def _rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def run_python_client(spec, timeout, rss_every=None):
    cmd = [sys.executable, COMPARE, "--child", json.dumps(spec)]
    out = run_measured(cmd, timeout, rss_every)
    line = [s for s in out["stdout"].splitlines() if s.startswith("{")]
    if out["rc"] != 0 or not line:
        raise RuntimeError(f"{spec['client']} {spec['workload']} failed (exit {out['rc']}"
                           f"{', timed out' if out['timed_out'] else ''}):\n"
                           f"{out['stderr'][-3000:]}")
    res = json.loads(line[-1])
    res.update(process_cpu_s=out["cpu_s"], peak_rss_mb=out["peak_rss_mb"])
    if rss_every:
        res["rss_timeline"] = out["rss_timeline"]
    return res


_JAVA_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def run_java(spec, timeout):
    from tests.harness.kafka_cluster import java_command

    props = [f"acks={spec['acks']}", f"linger.ms={spec['linger_ms']}",
             f"enable.idempotence={str(spec['idempotent']).lower()}"]
    if spec["compression"]:
        props.append(f"compression.type={spec['compression']}")
    if spec["batch_size"]:
        props.append(f"batch.size={spec['batch_size']}")
    cmd = java_command("org.apache.kafka.tools.ProducerPerformance",
                       "--topic", spec["topic"], "--num-records", str(spec["records"]),
                       "--record-size", str(spec["value_size"]),
                       "--throughput", str(spec["rate"] or -1),
                       "--bootstrap-server", spec["bootstrap"], "--command-property", *props,
                       heap="512m")
    out = run_measured(cmd, timeout)
    m = [x for x in _JAVA_FINAL.finditer(out["stdout"]) if int(x.group(1)) == spec["records"]]
    if out["rc"] != 0 or not m:
        raise RuntimeError(f"java {spec['workload']} failed (exit {out['rc']}):\n"
                           f"{(out['stdout'] + out['stderr'])[-3000:]}")
    m = m[-1]
    rate = float(m.group(2))
    # ProducerPerformance times its own send loop until close() has delivered everything,
    # with no warm-up; CPU is the whole JVM (startup and JIT included).
    res = {"wall_s": spec["records"] / rate, "cpu_s": out["cpu_s"], "process_cpu_s": out["cpu_s"],
           "peak_rss_mb": out["peak_rss_mb"], "cpu_is_whole_jvm": True}
    if spec["rate"]:
        res.update(avg_ms=float(m.group(3)), max_ms=float(m.group(4)), p50_ms=float(m.group(5)),
                   p99_ms=float(m.group(7)), p999_ms=float(m.group(8)))
    return res


def broker_data_on_tmpfs() -> str | None:
    """Temp dirs (a broker started here keeps its data in one) on /dev/shm from now on: a disk's
    flushes stay out of the figures; each run deletes its topic, as memory holds every byte."""
    tempfile.tempdir = "/dev/shm" if os.path.isdir("/dev/shm") else None
    return tempfile.tempdir


class Broker:
    """The one Kafka broker of a run: started here (KafkaCluster) or given by address. With
    ``secured``, it is a SecureKafkaCluster: the same broker, plus a SASL_SSL listener."""

    def __init__(self, bootstrap=None, secured=False):
        self.cluster = None
        self.bootstrap = bootstrap
        self.secured = secured
        self._admin = None

    def __enter__(self):
        if not self.bootstrap:
            from tests.harness.kafka_cluster import KafkaCluster
            from tests.harness.security import SecureKafkaCluster
            print("starting a 1-node Kafka broker ...", file=sys.stderr, flush=True)
            self.cluster = (SecureKafkaCluster(kerberos=False) if self.secured
                            else KafkaCluster(nodes=1)).start()
            self.bootstrap = self.cluster.bootstrap_servers
        return self

    def client_address(self, spec):
        """(bootstrap, kafka-python security settings) for the workload's listener."""
        if not spec.get("security"):
            return self.bootstrap, None
        config = self.cluster.client_config(spec["security"], mechanism="SCRAM-SHA-512")
        return config.pop("bootstrap_servers"), config

    def __exit__(self, *exc):
        if self.cluster is not None:
            self.cluster.stop()

    def cpu_s(self):
        """The broker JVM's CPU seconds so far (None for a broker given by address)."""
        return None if self.cluster is None else self.cluster.cpu_seconds(0)

    def thread_cpu_s(self):
        """The same by JVM thread name (None for a broker given by address)."""
        return None if self.cluster is None else self.cluster.thread_cpu_seconds(0)

    def admin(self):
        if self.cluster is not None:
            return self.cluster.admin()
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create(self, name, partitions=PARTITIONS):
        if self.cluster is not None:
            self.cluster.create_topic(name, partitions)
            return
        from confluent_kafka.admin import NewTopic
        self.admin().create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        deadline = time.monotonic() + 30
        while True:  # every partition has a leader
            t = self.admin().list_topics(name, timeout=5).topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions and all(
                    p.leader >= 0 for p in t.partitions.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} not ready")
            time.sleep(0.05)

    def count(self, topic) -> int:
        from confluent_kafka import Consumer, TopicPartition

        # the high watermarks: librdkafka's default read_committed would give the last stable
        # offsets, short of a transaction whose commit markers are still being written
        c = Consumer({"bootstrap.servers": self.bootstrap, "isolation.level": "read_uncommitted",
                      "group.id": "compare-" + uuid.uuid4().hex})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in md.partitions)
        finally:
            c.close()

    def delete(self, topic):
        try:
            self.admin().delete_topics([topic], operation_timeout=30)[topic].result(30)
        except Exception as e:  # noqa: BLE001 - a leftover topic only costs disk
            print(f"(could not delete {topic}: {e})", file=sys.stderr)


def run_one(broker, spec, timeout=None, rss_every=None) -> dict:
    """Create a topic, run one client on it, check every record landed, delete the topic."""
    bootstrap, security = broker.client_address(spec)
    spec = dict(spec, bootstrap=bootstrap, security_config=security,
                partitions=spec.get("partitions", PARTITIONS),
                threads=spec.get("threads", 1),
                topic=f"cmp-{spec['client']}-{spec['workload']}-{uuid.uuid4().hex[:8]}")
    broker.create(spec["topic"], spec["partitions"])
    timeout = timeout or 120 + spec["records"] / 5_000
    load = MachineLoad(broker)
    if spec["client"] == "java":
        res = run_java(spec, timeout)
    else:
        res = run_python_client(spec, timeout, rss_every)
    res.update(load.result(res["process_cpu_s"]))  # over the client's whole run
    warm = 0 if spec["client"] == "java" else spec["partitions"]
    landed = broker.count(spec["topic"])
    broker.delete(spec["topic"])
    markers = 0  # a transaction writes one commit marker per partition it touched
    if spec.get("transaction_size"):
        markers = spec["partitions"] * (len(_chunks(spec["records"], spec["transaction_size"]))
                                        + 1)
    if not spec["records"] + warm <= landed <= spec["records"] + warm + markers:
        raise RuntimeError(f"{spec['client']} {spec['workload']}: {landed} records in "
                           f"{spec['topic']}, expected {spec['records'] + warm}")
    res.update({k: spec.get(k) for k in ("client", "workload", "records", "value_size", "rate",
                                         "partitions", "threads", "buffer_share")})
    return res
