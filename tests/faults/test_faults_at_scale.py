"""Faults at scale: 200k keyed records with acks=all and idempotence on the 3-node cluster
(replication factor 3, min.insync.replicas=2) while 20 faults rotate over the brokers: SIGKILL
of a partition leader, SIGSTOP/SIGCONT of one, a graceful restart, SIGKILL of the active
controller (each node back and the ISR >= 2 before the next). The topic is read back with
kafka-python: every future completed, nothing acknowledged is lost, nothing is written twice,
each key's records keep their order, and each acknowledged offset is where the record is; the
leaders' log files (DumpLogSegments) hold contiguous sequence numbers per producer id and epoch.

The seed of the rotation is PYPROD_FAULT_SEED (default 12). On failure the message names the
fault log, pyprod's DEBUG log and a JSON report (under pytest's tmp_path).
"""
import json
import os
import time

from pyprod import errors
from tests.harness.fault_run import SHORT_DELIVERY_TIMEOUT, run_under_faults

N = 200_000
FAULTS = 20
SEED = int(os.environ.get("PYPROD_FAULT_SEED", "12"))


def _typed(name):
    cls = getattr(errors, name, None)
    return isinstance(cls, type) and issubclass(cls, errors.KafkaError)


def _assert_delivered_exactly(a, where):
    """Every future completed, typed; nothing acknowledged lost, nothing twice, order kept."""
    assert a.unresolved == 0, f"futures never completed: {a.samples.get('unresolved')}; {where}"
    assert all(_typed(e) for e in a.errors), f"untyped errors {a.errors}; {where}"
    assert a.lost_acked == 0, f"acknowledged but lost: {a.samples.get('lost_acked')}; {where}"
    assert a.duplicates == 0, f"written twice: {a.samples.get('duplicates')}; {where}"
    assert a.order_violations == 0, f"out of order: {a.samples.get('order_violations')}; {where}"
    assert a.offset_mismatches == 0, \
        f"acknowledged offsets differ: {a.samples.get('offset_mismatches')}; {where}"


def test_200k_idempotent_records_through_20_faults(kafka3, topic, tmp_path):
    name = topic(6, cluster=kafka3, replication_factor=3, configs={"min.insync.replicas": "2"})
    log_path, report_path = tmp_path / "pyprod-debug.log", tmp_path / "report.json"
    result = run_under_faults("pyprod", kafka3, name, N, faults=FAULTS, seed=SEED,
                              log_path=str(log_path))
    report_path.write_text(json.dumps(result.as_dict(), indent=1, default=str))
    a = result.audit
    where = (f"seed {SEED}; faults {result.fault_summary}; report {report_path}; "
             f"pyprod DEBUG log {log_path}")

    assert result.injector_error is None, f"{result.injector_error}; {where}"
    assert result.fault_summary["applied"] >= FAULTS, where
    assert set(result.fault_summary["by_kind"]) == {"kill_leader", "pause", "restart",
                                                     "kill_controller"}, where
    # the records were spread over the rotation: the last ones went out during the last fault
    assert result.send_s >= result.faults[-1]["t"], where

    _assert_delivered_exactly(a, where)
    assert a.foreign == 0, f"unknown records: {a.samples.get('foreign')}; {where}"
    assert a.acked + a.failed == N and a.read >= a.acked, where
    # as stored by the partition leaders: each producer id and epoch's sequence numbers follow
    # on from batch to batch, across retries, leader moves and restarts
    seq = result.sequences
    assert "error" not in seq, f"{seq}; {where}"
    assert seq["gaps"] == 0, f"sequence gaps {seq['gap_samples']}, epochs {seq['epochs']}; {where}"


def test_producer_id_reset_under_faults_never_duplicates(kafka3, topic, tmp_path):
    """A delivery timeout shorter than a leader's failover: batches expire, some of them in
    flight (written or not, nobody knows), so pyprod bumps its epoch. The reset must
    neither duplicate a record nor lose an acknowledged one, and under each producer id the
    stored sequence numbers stay contiguous."""
    name = topic(6, cluster=kafka3, replication_factor=3, configs={"min.insync.replicas": "2"})
    log_path, report_path = tmp_path / "pyprod-debug.log", tmp_path / "report.json"
    result = run_under_faults(
        "pyprod", kafka3, name, 40_000, faults=4, kinds=("pause", "kill_leader"), pause_s=6.0,
        seed=SEED, log_path=str(log_path),
        config=SHORT_DELIVERY_TIMEOUT["pyprod"])
    report_path.write_text(json.dumps(result.as_dict(), indent=1, default=str))
    a, seq = result.audit, result.sequences
    where = (f"seed {SEED}; faults {result.fault_summary}; errors {a.errors}; stored producer "
             f"ids/epochs {seq.get('epochs')}; report {report_path}; pyprod DEBUG log {log_path}")

    assert result.injector_error is None, f"{result.injector_error}; {where}"
    assert a.failed > 0 and len(seq["epochs"]) > 1, f"no batch expired, no reset: {where}"
    _assert_delivered_exactly(a, where)
    assert seq["gaps"] == 0, f"sequence gaps {seq['gap_samples']}; {where}"


def test_hung_leader_writes_nothing_late_after_a_producer_id_reset(kafka3, topic):
    """The leader of a partition hangs (SIGSTOP, shorter than the broker session timeout, so it
    stays leader) with produce requests of this producer in its socket buffers. The requests
    time out (the client closes the connection, but the broker still holds the bytes), the
    batches expire, the producer takes a new producer id or epoch and goes on. When the leader
    wakes up it reads the old requests: whatever it then appends must not land after records
    sent later. Java and librdkafka bump the epoch, which fences the old requests."""
    from pyprod import KafkaProducer
    from tests.harness.readback import read_all_kafka_python

    name = topic(3, cluster=kafka3, replication_factor=3, configs={"min.insync.replicas": "2"})
    controller = kafka3.controller_id()
    part = next(p for p in range(3) if kafka3.leader_of(name, p) != controller)
    leader = kafka3.leader_of(name, part)
    with KafkaProducer(bootstrap_servers=kafka3.bootstrap_servers, acks="all",
                       enable_idempotence=True, linger_ms=5, batch_size=2048,
                       request_timeout_ms=800, delivery_timeout_ms=1500) as p:
        for attempt in range(20):  # a 1.5 s delivery timeout: the first sends may expire
            try:
                p.send(name, b"-1", partition=part).get(timeout=30)
                break
            except errors.KafkaTimeoutError:
                assert attempt < 19, "the warm-up record never got through"
        futures, i = [], 0
        kafka3.pause_node(leader)
        try:
            end = time.monotonic() + 2.2
            while time.monotonic() < end:
                futures.append(p.send(name, b"%d" % i, partition=part))
                i += 1
                if i % 50 == 0:
                    time.sleep(0.01)
        finally:
            kafka3.resume_node(leader)
        futures += [p.send(name, b"%d" % j, partition=part) for j in range(i, i + 2000)]
        p.flush(timeout=60)
    failed = sum(f.failed() for f in futures)
    values = [int(r.value) for r in read_all_kafka_python(kafka3.bootstrap_servers, name)
              if r.partition == part and r.value != b"-1"]  # the warm-up ones
    late = [(a, b) for a, b in zip(values, values[1:]) if b < a]
    where = (f"leader {leader}, partition {part}, {len(futures)} sent, {failed} failed, "
             f"{len(values)} stored")
    assert failed > 0, f"no batch expired: {where}"
    assert len(values) == len(set(values)), f"duplicates: {where}"
    assert not late, f"{len(late)} records stored after later ones, e.g. {late[:5]}: {where}"


def test_audit_names_each_kind_of_problem():
    """The audit itself (no broker): a clean run passes, each planted fault is found."""
    from tests.harness.fault_run import audit, record
    from tests.harness.readback import Record

    n, keys = 12, 3
    outcomes = [(i % keys, i // keys) for i in range(n)]  # key k -> partition k, in order

    def rec(i, offset=None):
        key, value = record(i, keys)
        return Record(i % keys, i // keys if offset is None else offset, key, value, [], 0)

    clean = [rec(i) for i in range(n)]
    assert audit(n, outcomes, clean, keys).problems() == []

    lost = audit(n, outcomes, clean[:-1], keys)
    assert (lost.lost_acked, lost.samples["lost_acked"][0]["id"]) == (1, n - 1)
    dup = audit(n, outcomes, clean + [rec(4, offset=99)], keys)
    assert (dup.duplicates, dup.samples["duplicates"][0]["id"]) == (1, 4)
    swapped = [rec(i) for i in range(n) if i not in (1, 4)] + [rec(1, 1), rec(4, 0)]
    bad = audit(n, outcomes, swapped, keys)
    assert bad.order_violations == bad.order_violations_acked == 1
    assert bad.offset_mismatches == 2
    late = audit(n, outcomes[:4] + ["KafkaTimeoutError"] + outcomes[5:], swapped, keys)
    assert (late.order_violations, late.order_violations_acked) == (1, 0)
    pending = audit(n, outcomes[:-2] + [None, "KafkaTimeoutError"], clean, keys)
    assert (pending.unresolved, pending.failed, pending.failed_but_written) == (1, 1, 1)
    assert pending.errors == {"KafkaTimeoutError": 1}
    assert audit(n, outcomes, clean + [Record(0, 50, b"x", b"y", [], 0)], keys).foreign == 1
