"""send_batch edge cases against a real Kafka broker, on both kernel implementations (issue 27,
section 4): a record over max_request_size in the middle of a column, empty columns, a million
None values, a serializer raising half way, columns whose length is wrong or changes while the
call runs. Typed errors, nothing sent twice, no pool memory kept.

Each case runs in a child process (send_batch_edges_child.py): the producer module picks its
kernels at import, so the pure twins run with PYPROD_NO_EXTENSIONS=1, and a crash of the
compiled walk fails its test with the signal and stack instead of ending the session. The topic
is read back here, by confluent-kafka or kafka-python. Every child ends by sending one marker
record to partition 0 (the producer still works) and reports the pool's free memory after
flush().
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict

import pytest

import send_batch_edges_child as child
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

# the reader/checker (no wheel on some interpreters: cp313t; the matrix lists such skips)
confluent_kafka = pytest.importorskip("confluent_kafka")
OFFSET_BEGINNING = confluent_kafka.OFFSET_BEGINNING
Consumer = confluent_kafka.Consumer
KafkaException = confluent_kafka.KafkaException
TopicPartition = confluent_kafka.TopicPartition

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "send_batch_edges_child.py")
FAST = {"fetch.wait.max.ms": 10}  # confluent-kafka read-back without 0.5 s fetch waits
IMPLS = ["compiled", "pure"]
MILLION = "test_million_none_values_are_delivered"
KEYED = ["keyless", "keyed"]


@pytest.fixture(params=IMPLS)
def impl(request):
    return request.param


class _Child:
    """A child process running one case, its output in temporary files."""

    def __init__(self, impl, case, variant, kafka, name):
        env = {k: v for k, v in os.environ.items() if k != "PYPROD_NO_EXTENSIONS"}
        if impl == "pure":
            env["PYPROD_NO_EXTENSIONS"] = "1"
        self.impl, self.label = impl, f"{impl} {case}[{variant}]"
        self.out, self.err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", CHILD, case, variant,
             kafka.bootstrap_servers, name], env=env, stdout=self.out, stderr=self.err,
            text=True)

    def report(self):
        """The child's JSON report; a crash, hang or error exit fails the test."""
        try:
            rc = self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"{self.label} hung (no exit in 300 s)")
        self.out.seek(0)
        self.err.seek(0)
        if rc != 0:
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
            pytest.fail(f"{self.label}: the child died ({how}):\n{self.err.read()[-4000:]}")
        out = json.loads(self.out.read().strip().splitlines()[-1])
        assert out["pure"] == (self.impl == "pure")
        assert out["accumulator"].startswith("kcore.pure.") == (self.impl == "pure"), \
            out["accumulator"]
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _run(impl, case, variant, kafka, name):
    return _Child(impl, case, variant, kafka, name).report()


@pytest.fixture(scope="module", autouse=True)
def million_runs(request, kafka):
    """The million-record children of case 5, started with the module's first test when any
    of its tests is selected, so they work while the other cases run: {(impl, keyed): (child,
    topic)}."""
    runs = {}
    if any(item.originalname == MILLION for item in request.session.items):
        for impl in IMPLS:
            for keyed in KEYED:
                name = kafka.create_topic(f"{MILLION}-{impl}-{keyed}-{uuid.uuid4().hex[:8]}", 3)
                runs[impl, keyed] = _Child(impl, "nones", keyed, kafka, name), name
    yield runs
    for run, _ in runs.values():
        run.stop()


def _memory_back(out):
    assert not out["incomplete"], "batches still incomplete after flush()"
    kept = out["buffer_memory"] - out["free_memory"]
    assert kept == 0, f"the pool kept {kept} bytes after every batch completed"


def _raised(out):
    return out.get("raised", [None, None])


def _sent_by_call(kafka, name):
    """The records in the topic besides the child's marker (nothing else must be there)."""
    read = read_all_confluent(kafka.bootstrap_servers, name, expected_count=1, **FAST)
    assert [(r.partition, r.key, r.value) for r in read if r.value == child.MARKER] == \
        [(0, None, child.MARKER)], "the marker record is missing or doubled"
    return [r for r in read if r.value != child.MARKER]


def _marker_off(read):
    """The records read without the child's marker (which must be there, once)."""
    rest = [r for r in read if r.value != child.MARKER]
    assert len(read) - len(rest) == 1, "the marker record is missing or doubled"
    return rest


def _index_order(read):
    """Each partition holds its records in call order (values start with their index)."""
    by_part = defaultdict(list)
    for r in read:
        by_part[r.partition].append(int(r.value[:5]))
    for part, idx in by_part.items():
        assert idx == sorted(set(idx)), f"partition {part}: records out of call order"


def _scan(bootstrap, name, partitions, timeout=60):
    """Per-partition counts, every key and a Counter of the values of a topic, read to its end
    offsets by a plain confluent-kafka consumer (read_all_confluent takes twice as long for
    a million records)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "max.partition.fetch.bytes": 16 << 20, **FAST})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in range(partitions)])
        left = {p for p, end in ends.items() if end}
        counts, keys, values = Counter(), [], Counter()
        deadline = time.monotonic() + timeout
        while left:
            assert time.monotonic() < deadline, f"partitions {left} not read to their end"
            for m in c.consume(10_000, 0.5):
                if m.error():
                    raise KafkaException(m.error())
                p = m.partition()
                counts[p] += 1
                keys.append(m.key())
                values[m.value()] += 1
                if m.offset() + 1 >= ends[p]:
                    left.discard(p)
        return counts, keys, values
    finally:
        c.close()


# -- 1. a record over max_request_size in the middle of a column --------------------------------
@pytest.mark.parametrize("form", ["list", "arrow"])
def test_too_large_record_fails_alone(kafka, topic, impl, form):
    name = topic(4)
    out = _run(impl, "too_large", form, kafka, name)
    assert _raised(out)[0] is None, out["raised"]
    n = child.N_TOO_LARGE
    assert out["outcomes"] == [{"failures": [[child.BIG_AT, "MessageSizeTooLargeError"]],
                                "failed_count": 1, "succeeded_count": n - 1}]
    if form == "list":
        read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=n)
    else:
        read = read_all_confluent(kafka.bootstrap_servers, name, expected_count=n, **FAST)
    read = _marker_off(read)
    keys, values = child.too_large_rows()
    compare([Sent(k, v) for i, (k, v) in enumerate(zip(keys, values)) if i != child.BIG_AT],
            read, check_timestamps=False)  # byte-exact, each once, per-key order
    _index_order(read)
    _memory_back(out)


# -- 2. empty columns ---------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["list", "arrow"])
def test_empty_column_completes_at_once(kafka, topic, impl, form):
    name = topic(2)
    out = _run(impl, "empty", form, kafka, name)
    assert _raised(out)[0] is None, out["raised"]
    assert out["done_at_once"] == [True, True]  # without and with (empty) keys
    assert out["outcomes"] == [{"record_count": 0, "partition_counts": {}}] * 2
    assert _sent_by_call(kafka, name) == []
    _memory_back(out)


# -- 3. a serializer raising half way -----------------------------------------------------------
@pytest.mark.parametrize("which", ["value", "key"])
def test_serializer_raising_half_way_sends_nothing(kafka, topic, impl, which):
    """The first call raises the serializer's own exception and appends nothing; the same
    column sent again arrives exactly once."""
    name = topic(3)
    out = _run(impl, "serializer_raises", which, kafka, name)
    assert out.get("first_raised") == ["Boom", "serializer refused item #%d" % (child.RAISE_AT - 1)]
    assert _raised(out)[0] is None, out["raised"]
    n = child.N_SERIALIZED
    [o] = out["outcomes"]
    assert o["record_count"] == n
    read = _marker_off(read_all_confluent(kafka.bootstrap_servers, name, expected_count=n + 1,
                                          **FAST))
    values = [v.encode() for v in child.serialized_values()]
    keys = values if which == "key" else [None] * n
    compare([Sent(k, v) for k, v in zip(keys, values)], read, check_timestamps=False)
    _memory_back(out)


# -- 4. columns of the wrong length, told or found while the call runs --------------------------
@pytest.mark.parametrize("variant", [
    "keys_shorter",        # len(keys) != len(values), told
    "lying_values",        # values.__len__ says 5000, iterates 1 item
    "lying_keys",          # the same for keys
    "shrunk_values",       # the value serializer empties values past its first item
    "shrunk_keys",         # ... keys
    "shrunk_partitions",   # ... partitions
    "shrunk_timestamps",   # ... timestamps
])
def test_column_length_mismatch_is_a_value_error(kafka, topic, impl, variant):
    name = topic(3)
    out = _run(impl, "bad_length", variant, kafka, name)
    sent = _sent_by_call(kafka, name)
    assert (_raised(out)[0], len(sent)) == ("ValueError", 0), \
        f"expected ValueError and nothing sent; raised {out.get('raised')}, future " \
        f"{out.get('outcomes')}, {len(sent)} records sent: {[r.value for r in sent[:3]]}"
    _memory_back(out)


# -- 5. a million None values (last: their children started with the first test) ---------
# send() refuses a record with neither key nor value (ValueError, as kafka-python's assertion);
# send_batch documents None as null for values and keys, and the custom-partitioner path sends
# such a record on purpose (KafkaProducer._send_batch_each): every record is delivered, as a
# null-value record (a tombstone when keyed), by both twins.
@pytest.mark.parametrize("keyed", KEYED)
def test_million_none_values_are_delivered(kafka, million_runs, impl, keyed):
    run, name = million_runs[impl, keyed]
    out = run.report()
    assert _raised(out)[0] is None, out["raised"]
    n = child.N_NONES
    [o] = out["outcomes"]
    assert o["record_count"] == n and sum(o["partition_counts"].values()) == n
    counts, keys, values = _scan(kafka.bootstrap_servers, name, 3)
    assert values == Counter({None: n, child.MARKER: 1})
    counts[0] -= 1  # the marker
    assert counts == {int(p): c for p, c in o["partition_counts"].items()}
    sent = child.none_keys(keyed == "keyed") or [None] * n
    assert Counter(keys) == Counter(sent + [None])  # each once; None: the marker's too
    _memory_back(out)
