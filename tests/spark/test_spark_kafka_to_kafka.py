"""Kafka in, Kafka out, exactly once, with the driver killed: Spark's own Kafka source
(spark-sql-kafka-0-10, tests/harness/spark_kafka_jars.py) -> upper-cased values, keys and
partitions kept, a header naming the input record -> format("pyprod") exactlyOnce, from a
checkpoint (tests/spark/pipeline_driver.py, a Spark driver of its own, local[2,2]).

The driver is SIGKILLed with its JVM and Python workers (its process group) three times:
mid-stream in a task, at the sink's commit decision, and half-way through the sink's commit;
each restart goes on from the checkpoint, the last one to the end of the input. The output is
read back by kafka-python: under read_committed every input record's transform exactly once,
in input order per partition; under read_uncommitted the rows of the killed and re-run
attempts too, aborted, and no transaction left open. Both transaction protocols (kafka_txn)."""
import collections
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.harness import readback
from tests.harness.readback import end_offsets

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "pipeline_driver.py")
N = 20_000
PARTITIONS = 4
PER_BATCH = 1000      # maxOffsetsPerTrigger: 20 micro-batches
RUN_TIMEOUT_S = 900   # a deadline against hangs only
TASK, DECISION, HALF = 3, 8, 13   # the micro-batches the three crashes hit


def produce_input(bootstrap, topic):
    """N keyed records, round-robin over the partitions, by confluent-kafka."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    for i in range(N):
        producer.produce(topic, key=b"key-%d" % (i % 997), value=b"record-%05d-of-abc" % i,
                         partition=i % PARTITIONS)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "input not delivered"


def read(bootstrap, topic, committed=True, **kw):
    return readback.read_all_kafka_python(
        bootstrap, topic, isolation_level="read_committed" if committed else "read_uncommitted",
        timeout=120, **kw)


def source_of(record):
    """(input partition, input offset) from the header the pipeline adds."""
    (name, value), = record.headers
    assert name == "source", record
    p, o = value.split(b":")
    return int(p), int(o)


class Pipeline:
    """Starts tests/spark/pipeline_driver.py on one checkpoint, as a user restarts a job."""

    def __init__(self, bootstrap, tmp_path, input_topic, output_topic):
        self.tmp, self.runs = tmp_path, 0
        self.checkpoint = tmp_path / "checkpoint"
        self.mark = tmp_path / "crashes"
        self.args = [sys.executable, DRIVER, "--bootstrap", bootstrap, "--input", input_topic,
                     "--output", output_topic, "--checkpoint", str(self.checkpoint),
                     "--prefix", "k2k-" + uuid.uuid4().hex[:8],
                     "--max-offsets", str(PER_BATCH), "--mark", str(self.mark)]

    def run(self, die=None):
        """One run to its end (None: to the end of the input): (exit code, last output line,
        log file, the driver's pid)."""
        self.runs += 1
        log = self.tmp / ("driver-%d.log" % self.runs)
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.args + (["--die", die] if die else []), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                code = proc.wait(RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                pytest.fail("driver run %d (--die %s) hung:\n%s" % (self.runs, die,
                                                                    self.tail(log)))
        assert group_gone(proc.pid), "a process of the killed driver survived it"
        lines = log.read_text(errors="replace").strip().splitlines()
        return code, (lines[-1] if lines else ""), log, proc.pid

    @staticmethod
    def tail(log, n=60):
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])

    def crash(self, die):
        code, _, log, pid = self.run(die)
        assert code == -signal.SIGKILL, "driver run %d (--die %s) ended with %s:\n%s" % (
            self.runs, die, code, self.tail(log))
        point, batch = die.split(":")
        crashes = self.mark.read_text().splitlines() if self.mark.exists() else []
        here = [c for c in crashes if c.startswith("%s %s " % (point, batch))]
        assert here, crashes
        # a Python worker of the JVM's crashed, not the driver's Python: the JVM went too
        assert all("(pid %d," % pid not in c for c in here), here

    def entry(self, batch):
        path = self.checkpoint / "pyprod" / ("%d.json" % batch)
        return json.loads(path.read_text())

    def committed_batches(self):
        return sorted(int(f.name) for f in (self.checkpoint / "commits").iterdir()
                      if f.name.isdigit())

    def batch_ranges(self, topic):
        """{batch: {partition: (start, end)}} from Spark's offset log."""
        ends = {}
        for f in (self.checkpoint / "offsets").iterdir():
            if f.name.isdigit():
                offsets = json.loads(f.read_text().splitlines()[-1])[topic]
                ends[int(f.name)] = {int(p): o for p, o in offsets.items()}
        out, start = {}, {p: 0 for p in range(PARTITIONS)}
        for b in sorted(ends):
            out[b] = {p: (start.get(p, 0), e) for p, e in ends[b].items()}
            start = ends[b]
        return out


def group_gone(pgid, timeout=30.0):
    """True once no live (non-zombie) process is left in process group ``pgid``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.5)
    return False


def batch_of(ranges, p, o):
    return next(b for b, r in ranges.items() if r[p][0] <= o < r[p][1])


def rows_in(ranges, batches):
    return sum(e - s for b in batches for s, e in ranges[b].values())


def test_kafka_to_kafka_exactly_once_through_driver_crashes(kafka_txn, topic, tmp_path):
    bootstrap = kafka_txn.bootstrap_servers
    in_topic = topic(PARTITIONS, cluster=kafka_txn)
    out_topic = topic(PARTITIONS, cluster=kafka_txn)
    produce_input(bootstrap, in_topic)
    inputs = {(r.partition, r.offset): r for r in read(bootstrap, in_topic, expected_count=N)}
    assert len(inputs) == N
    pipe = Pipeline(bootstrap, tmp_path, in_topic, out_topic)

    # 1. mid-stream: a task of batch TASK flushed its rows, its transaction open
    pipe.crash("task:%d" % TASK)
    assert pipe.committed_batches() == list(range(TASK))
    ranges = pipe.batch_ranges(in_topic)
    assert len(read(bootstrap, out_topic)) == rows_in(ranges, range(TASK))

    # 2. at the commit decision of batch DECISION: entry written, no transaction committed
    pipe.crash("decision:%d" % DECISION)
    assert pipe.entry(DECISION)["state"] == "committing"
    assert pipe.committed_batches() == list(range(DECISION))
    ranges = pipe.batch_ranges(in_topic)
    assert len(read(bootstrap, out_topic)) == rows_in(ranges, range(DECISION))

    # 3. half-way through the commit of batch HALF: its first transaction committed only
    pipe.crash("half:%d" % HALF)
    assert pipe.entry(DECISION)["state"] == "committed"
    entry = pipe.entry(HALF)
    assert entry["state"] == "committing" and len(entry["transactions"]) == PARTITIONS
    ranges = pipe.batch_ranges(in_topic)
    seen = collections.Counter(batch_of(ranges, *source_of(r))
                               for r in read(bootstrap, out_topic))
    half = ranges[HALF]
    assert seen[HALF] in {e - s for s, e in half.values()}, \
        "not exactly one transaction of batch %d committed: %s" % (HALF, seen)
    assert sum(seen.values()) - seen[HALF] == rows_in(ranges, range(HALF))

    # 4. restarted to the end of the input
    code, last, log, _ = pipe.run()
    assert code == 0, pipe.tail(log)
    summary = json.loads(last)
    assert summary["error"] is None, summary
    assert summary["batches"][0] == HALF, summary  # the re-run of the half-committed batch
    ranges = pipe.batch_ranges(in_topic)
    assert pipe.committed_batches() == sorted(ranges) and len(ranges) >= N // PER_BATCH
    for b in (DECISION, HALF):  # finished at the restart, before the re-run's tasks
        entry = pipe.entry(b)
        assert entry["state"] == "committed" and entry.get("lost") == [] \
            and "unknown" not in entry, entry

    check_output(bootstrap, out_topic, inputs, ranges)


def check_output(bootstrap, out_topic, inputs, ranges):
    committed = read(bootstrap, out_topic, expected_count=N)
    assert len(committed) == N, "%d records under read_committed, not %d" % (len(committed), N)
    by_partition = collections.defaultdict(list)
    for r in committed:  # sorted by (partition, offset)
        p, o = source_of(r)
        src = inputs[(p, o)]
        assert (r.partition, r.key, r.value) == (p, src.key, src.value.upper()), (r, src)
        by_partition[p].append(o)
    for p in range(PARTITIONS):  # each input record once, in input order
        assert by_partition[p] == sorted(o for q, o in inputs if q == p), \
            "partition %d: output is not its input once, in order" % p

    everything = read(bootstrap, out_topic, committed=False)
    extra = collections.Counter(source_of(r) for r in everything) - collections.Counter(
        source_of(r) for r in committed)
    extra_batches = collections.Counter(batch_of(ranges, p, o) for p, o in extra.elements())
    assert set(extra_batches) <= {TASK, DECISION, HALF}, extra_batches
    assert extra_batches[TASK] >= min(e - s for s, e in ranges[TASK].values()), \
        "no prepared transaction of the killed batch %d in the log: %s" % (TASK, extra_batches)
    for b in (DECISION, HALF):  # the re-run of a decided batch, aborted whole
        assert extra_batches[b] == rows_in(ranges, [b]), extra_batches
    assert end_offsets(bootstrap, out_topic, True) == end_offsets(bootstrap, out_topic, False), \
        "a transaction is left open"
