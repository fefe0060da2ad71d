"""One producer client writing keyed records through a :class:`FaultInjector` rotation, then an
independent read-back and an audit of what was acknowledged against what the topic holds.

Record ``i`` has key ``key-%04d % (i % keys)`` and value ``"%08d:%06d" % (i, i // keys)``: its
id and its sequence number within its key, so the read-back needs no state to find duplicates,
losses and per-key order. Clients: "pyprod", "kafka-python" (both send() -> future) and
"confluent-kafka" (produce() with a delivery callback); all with acks=all and idempotence.

    result = run_under_faults("pyprod", cluster, topic, 200_000, faults=20, seed=7)
    result.audit.problems()   # [] when nothing was lost, duplicated, reordered or left pending
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from tests.harness.kafka_cluster import java_command

from .fault_injector import FaultInjector
from .readback import read_all_kafka_python

__all__ = ["CLIENTS", "PRODUCER_CONFIG", "SHORT_DELIVERY_TIMEOUT", "Audit", "RunResult", "audit",
           "log_sequences", "record", "parse_value", "run_under_faults"]

CLIENTS = ("pyprod", "kafka-python", "confluent-kafka")
log = logging.getLogger("tests.harness.faults")
KEYS = 256
SAMPLE = 20  # ids kept per kind of problem, for the report

# shared producer settings, per client; request timeouts short enough that a paused broker
# costs a few seconds, delivery timeouts long enough to outlast any single fault
PRODUCER_CONFIG = {
    "pyprod": dict(acks="all", enable_idempotence=True, linger_ms=5,
                   max_in_flight_requests_per_connection=5, request_timeout_ms=5000,
                   delivery_timeout_ms=120_000, retry_backoff_ms=100,
                   reconnect_backoff_max_ms=1000),
    "kafka-python": dict(acks="all", enable_idempotence=True, linger_ms=5,
                         max_in_flight_requests_per_connection=5, request_timeout_ms=5000,
                         delivery_timeout_ms=120_000, retry_backoff_ms=100,
                         reconnect_backoff_max_ms=1000),
    "confluent-kafka": {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                        "max.in.flight.requests.per.connection": 5,
                        "socket.timeout.ms": 5000, "request.timeout.ms": 5000,
                        "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
                        "reconnect.backoff.max.ms": 1000, "partitioner": "murmur2_random"},
}

# overrides of PRODUCER_CONFIG: a delivery timeout shorter than a leader's failover (the
# brokers fence a silent one after 3 s), so batches expire (some in flight, written or not) and
# the idempotent producer must reset its id/epoch
SHORT_DELIVERY_TIMEOUT = {
    "pyprod": dict(delivery_timeout_ms=2500, request_timeout_ms=2000),
    "kafka-python": dict(delivery_timeout_ms=2500, request_timeout_ms=2000),
    "confluent-kafka": {"message.timeout.ms": 2500, "request.timeout.ms": 2000,
                        "socket.timeout.ms": 2000},
}


def record(i: int, keys: int = KEYS) -> tuple[bytes, bytes]:
    """(key, value) of record ``i``."""
    return b"key-%04d" % (i % keys), b"%08d:%06d" % (i, i // keys)


def parse_value(value) -> tuple[int, int] | None:
    """(id, per-key sequence) of a value written by :func:`record`; None for anything else."""
    try:
        a, b = bytes(value).split(b":")
        return int(a), int(b)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# the audit

@dataclass
class Audit:
    records: int
    acked: int = 0
    failed: int = 0  # futures completed with an error
    unresolved: int = 0  # futures never completed
    read: int = 0
    lost_acked: int = 0  # acknowledged, not in the topic
    duplicates: int = 0  # extra copies in the topic
    order_violations: int = 0  # a key's sequence went backwards within its partition
    order_violations_acked: int = 0  # ... between two acknowledged records
    offset_mismatches: int = 0  # acknowledged at (p, o) but read elsewhere
    failed_but_written: int = 0  # failed future whose record is in the topic (allowed)
    foreign: int = 0  # records in the topic this run did not write
    errors: dict = field(default_factory=dict)  # error type -> count
    samples: dict = field(default_factory=dict)  # problem -> [details]

    def problems(self) -> list[str]:
        """What breaks exactly-once delivery of the acknowledged records, as sentences."""
        out = []
        for name in ("unresolved", "lost_acked", "duplicates", "order_violations",
                     "offset_mismatches", "foreign"):
            count = getattr(self, name)
            if count:
                out.append(f"{name}: {count} (e.g. {self.samples.get(name, [])[:SAMPLE]})")
        return out

    def as_dict(self) -> dict:
        return asdict(self)


def _sample(samples, name, item):
    lst = samples.setdefault(name, [])
    if len(lst) < SAMPLE:
        lst.append(item)


def audit(n: int, outcomes: list, read: list, keys: int = KEYS) -> Audit:
    """``outcomes[i]``: None (pending), (partition, offset) (acknowledged) or an error name;
    ``read``: :class:`~tests.harness.readback.Record` list of the whole topic."""
    a = Audit(records=n, read=len(read))
    s = a.samples
    for o in outcomes:
        if o is None:
            a.unresolved += 1
        elif isinstance(o, tuple):
            a.acked += 1
        else:
            a.failed += 1
            a.errors[o] = a.errors.get(o, 0) + 1
    for i, o in enumerate(outcomes):
        if o is None:
            _sample(s, "unresolved", i)
    where = defaultdict(list)  # id -> [(partition, offset)]
    newest = {}  # (partition, key) -> (highest sequence read so far, its id)
    for r in sorted(read, key=lambda r: (r.partition, r.offset)):
        parsed = parse_value(r.value)
        if parsed is None or not 0 <= parsed[0] < n or record(parsed[0], keys)[0] != r.key:
            a.foreign += 1
            _sample(s, "foreign", (r.partition, r.offset, r.key, r.value))
            continue
        i, seq = parsed
        where[i].append((r.partition, r.offset))
        prev = newest.get((r.partition, r.key))
        if prev is not None and seq < prev[0]:
            a.order_violations += 1
            both_acked = isinstance(outcomes[i], tuple) and isinstance(outcomes[prev[1]], tuple)
            a.order_violations_acked += both_acked
            _sample(s, "order_violations", dict(
                partition=r.partition, offset=r.offset, key=r.key.decode(), id=i, seq=seq,
                outcome=outcomes[i], after_id=prev[1], after_seq=prev[0],
                after_outcome=outcomes[prev[1]]))
        if prev is None or seq > prev[0]:
            newest[(r.partition, r.key)] = (seq, i)
    for i, places in where.items():
        if len(places) > 1:
            a.duplicates += len(places) - 1
            _sample(s, "duplicates", dict(id=i, at=places, outcome=outcomes[i]))
        o = outcomes[i]
        if isinstance(o, tuple):
            if o not in places:
                a.offset_mismatches += 1
                _sample(s, "offset_mismatches", dict(id=i, acked_at=o, read_at=places))
        elif o is not None:
            a.failed_but_written += 1
    for i, o in enumerate(outcomes):
        if isinstance(o, tuple) and i not in where:
            a.lost_acked += 1
            _sample(s, "lost_acked", dict(id=i, acked_at=o))
    return a


_BATCH = re.compile(rb"baseOffset: (\d+) lastOffset: (\d+) count: \d+ baseSequence: (-?\d+) "
                    rb"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+)")


def log_sequences(cluster, topic: str, timeout: float = 120.0) -> dict:
    """The producer ids, epochs and sequence numbers of every batch of ``topic`` as the
    partition leaders stored them (Kafka's DumpLogSegments on their log files): ``epochs`` is
    the list of distinct [producer id, epoch], ``gaps`` counts batches whose base sequence does
    not follow the previous batch of the same producer id and epoch (a new epoch starts at 0)."""
    md = cluster.admin().list_topics(topic, timeout=10).topics[topic]
    files = []
    for p in sorted(md.partitions):
        d = os.path.join(cluster.node_dir(md.partitions[p].leader), "data", f"{topic}-{p}")
        files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))
    out = subprocess.run(java_command("org.apache.kafka.tools.DumpLogSegments", "--files",
                                      ",".join(files)),
                         capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    result = {"batches": 0, "epochs": [], "gaps": 0, "gap_samples": []}
    last = {}  # (partition, producer id, epoch) -> last sequence
    partition = None
    for line in out.stdout.splitlines():
        if line.startswith(b"Dumping "):
            partition = int(line.rsplit(b"-", 1)[1].split(b"/")[0])
            continue
        m = _BATCH.search(line)
        if not m:
            continue
        base_off, _, base_seq, last_seq, pid, epoch = map(int, m.groups())
        result["batches"] += 1
        if [pid, epoch] not in result["epochs"]:
            result["epochs"].append([pid, epoch])
        prev = last.get((partition, pid, epoch))
        if base_seq != (0 if prev is None else prev + 1):
            result["gaps"] += 1
            if len(result["gap_samples"]) < SAMPLE:
                result["gap_samples"].append(dict(partition=partition, offset=base_off,
                                                  pid=pid, epoch=epoch, base_sequence=base_seq,
                                                  after=prev))
        last[(partition, pid, epoch)] = last_seq
    if out.returncode != 0 or not result["batches"]:
        raise RuntimeError(f"DumpLogSegments failed ({out.returncode}): {out.stderr[-2000:]!r}")
    return result


# ---------------------------------------------------------------------------------------------
# the clients

def _send_futures(producer, topic, n, injector, keys, flush_s):
    """pyprod and kafka-python: send(), keep the futures, flush; outcomes from the futures."""
    futures = [None] * n
    send = producer.send
    for lo, hi in injector.paced(n):
        for i in range(lo, hi):
            key, value = record(i, keys)
            futures[i] = send(topic, value, key=key)
    with contextlib.suppress(Exception):  # a timed-out flush leaves futures pending: audited
        producer.flush(timeout=flush_s)
    out = []
    for f in futures:
        if not f.is_done:
            out.append(None)
        elif f.exception is None:
            out.append((f.value.partition, f.value.offset))
        else:
            out.append(type(f.exception).__name__)
    return out


WARM_ATTEMPTS = 10  # a short delivery timeout can expire the first record of a new topic


def _run_futures(cls, bootstrap, topic, n, injector, keys, flush_s, config):
    p = cls(bootstrap_servers=bootstrap, **config)
    try:  # metadata, connections and a producer id before the first fault
        for attempt in range(WARM_ATTEMPTS):
            try:
                p.send(topic, b"warm:-1", key=b"warm").get(timeout=60)
                break
            except Exception:  # noqa: BLE001 - the last attempt's error is raised
                if attempt == WARM_ATTEMPTS - 1:
                    raise
    except BaseException:
        p.close(timeout=5)
        raise
    return p, lambda: _send_futures(p, topic, n, injector, keys, flush_s)


def _run_pyprod(*args):
    from pyprod import KafkaProducer
    return _run_futures(KafkaProducer, *args)


def _run_kafka_python(*args):
    from kafka import KafkaProducer
    return _run_futures(KafkaProducer, *args)


class _ConfluentClose:
    def __init__(self, p):
        self.p = p

    def close(self, timeout=None):
        self.p.flush(timeout or 0)


def _run_confluent(bootstrap, topic, n, injector, keys, flush_s, config):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **config})
    warm = []
    for _ in range(WARM_ATTEMPTS):
        p.produce(topic, b"warm:-1", key=b"warm", on_delivery=lambda err, msg: warm.append(err))
        p.flush(60)
        if warm and warm[-1] is None:
            break
    else:
        raise RuntimeError(f"confluent-kafka could not write the warm-up record: {warm}")

    def go():
        outcomes = [None] * n

        def done(err, msg):
            parsed = parse_value(msg.value())
            if parsed is not None:
                outcomes[parsed[0]] = ((msg.partition(), msg.offset()) if err is None
                                       else err.name())
        produce, poll = p.produce, p.poll
        for lo, hi in injector.paced(n):
            for i in range(lo, hi):
                key, value = record(i, keys)
                while True:
                    try:
                        produce(topic, value, key=key, on_delivery=done)
                        break
                    except BufferError:  # local queue full: serve callbacks, retry
                        poll(0.05)
            poll(0)
        p.flush(flush_s)
        return outcomes
    return _ConfluentClose(p), go


_RUNNERS = {"pyprod": _run_pyprod, "kafka-python": _run_kafka_python,
            "confluent-kafka": _run_confluent}


@dataclass
class RunResult:
    client: str
    topic: str
    records: int
    wall_s: float  # first send until flush returned
    send_s: float  # first send until the last send() returned (faults' "t" on the same clock)
    faults: list  # [Fault.as_dict()]
    fault_summary: dict
    audit: Audit
    sequences: dict  # log_sequences() of the topic after the run, or {"error": ...}
    readback: dict  # how the read-back went: {"first_read_missing": n, "reread": bool}
    injector_error: str | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["audit"] = self.audit.as_dict()
        return d


def run_under_faults(client: str, cluster, topic: str, n: int, *, keys: int = KEYS,
                     config: dict | None = None, log_path: str | None = None,
                     flush_s: float = 150.0, read_timeout: float = 180.0,
                     bootstrap: str | None = None, **injector_kwargs) -> RunResult:
    """Write ``n`` keyed records with ``client`` to ``topic`` (which must exist) while a
    :class:`FaultInjector` (``injector_kwargs``) rotates faults over ``cluster``; read the topic
    back with kafka-python, audit it, and check the sequence numbers the leaders stored.
    ``log_path``: pyprod's DEBUG log, the injector's and the client's own go to that file (only)
    for the run. ``config`` overrides the client's :data:`PRODUCER_CONFIG`; ``bootstrap``: the
    producer's listener (default the PLAINTEXT one, which the read-back always uses)."""
    if client not in _RUNNERS:
        raise ValueError(f"client must be one of {CLIENTS}, got {client!r}")
    cfg = {**PRODUCER_CONFIG[client], **(config or {})}
    if log_path and client == "confluent-kafka":
        cfg.setdefault("logger", logging.getLogger("rdkafka.producer"))
    undo_log = _log_to_file(log_path, client)
    injector = FaultInjector(cluster, topic, **injector_kwargs)
    producer = None
    try:
        producer, go = _RUNNERS[client](bootstrap or cluster.bootstrap_servers, topic, n,
                                        injector, keys, flush_s, cfg)
        injector.start()
        t0 = time.monotonic()
        outcomes = go()
        wall = time.monotonic() - t0
        injector.join()  # the rest of the rotation, if the records went out before its end
        injector.heal()
        with contextlib.suppress(Exception):  # a close that times out: the audit shows why
            producer.close(timeout=30)
        producer = None
        result, readback = _read_and_audit(cluster, topic, n, outcomes, keys, read_timeout)
        try:
            sequences = log_sequences(cluster, topic)
        except Exception as e:  # noqa: BLE001 - reported, the audit stands without it
            sequences = {"error": repr(e)}
        return RunResult(client, topic, n, round(wall, 3), round(injector.paced_until, 3),
                         [f.as_dict() for f in injector.faults], injector.summary(), result,
                         sequences, readback,
                         None if injector.error is None else repr(injector.error))
    finally:
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.close(timeout=5)
        if injector.is_alive():
            injector.stop()
        undo_log()


# the client's own logger (and level) captured with pyprod's in the run's log file
_CLIENT_LOGGERS = {"pyprod": [], "kafka-python": [("kafka", logging.INFO)],
                   "confluent-kafka": [("rdkafka.producer", logging.DEBUG)]}


def _read_and_audit(cluster, topic, n, outcomes, keys, timeout):
    """Read the topic to the end offsets and audit. Right after a fault, a partition's new
    leader can report an end offset (its high watermark) short of records already acknowledged,
    until its followers fetch again; so if acknowledged records are missing, read again until
    at least every acknowledged record's count is there (60 s at most) and audit that."""
    def read(expected=None, wait=timeout):
        records = read_all_kafka_python(cluster.bootstrap_servers, topic,
                                        None if expected is None else expected + 1,  # + warm
                                        timeout=wait)
        return [r for r in records if r.key != b"warm"]

    result = audit(n, outcomes, read(), keys)
    info = {"first_read_missing": result.lost_acked, "reread": False}
    if result.lost_acked:
        log.warning("%s: %d acknowledged records missing from the first read, reading again",
                    topic, result.lost_acked)
        info["reread"] = True
        try:
            records = read(result.acked, 60.0)
        except TimeoutError:
            records = read()
        result = audit(n, outcomes, records, keys)
    return result, info


def _log_to_file(path, client):
    """Send pyprod's DEBUG log (the injector's included) and the client's log to ``path`` only;
    returns a function undoing it."""
    if not path:
        return lambda: None
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter(
        "%(asctime)s.%(msecs)03d %(threadName)s %(name)s %(levelname)s %(message)s",
        "%H:%M:%S"))
    saved = []
    for name, level in [("pyprod", logging.DEBUG)] + _CLIENT_LOGGERS[client]:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level, lg.propagate))
        lg.addHandler(handler)
        lg.setLevel(level)
        lg.propagate = False  # not into pytest's or the root's handlers

    def undo():
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()
    return undo
