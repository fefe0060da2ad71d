"""Zombie tasks of exactly-once batch writes: a task attempt that still writes after the driver
committed or aborted its write (a slow or cut-off executor) never makes rows visible, and does
not hold back read_committed readers (the last stable offset, LSO) until
transaction_timeout_ms.

The driver marks the run closed (InitProducerId on ``<prefix>-<run>-closed``) before it commits
or aborts; a task asks for that id (DescribeTransactions) before its InitProducerId and after
its flush, and aborts itself if it exists. The tasks and the driver are driven without Spark (a
TaskContext stand-in, as Spark's workers call them) on both transaction protocols (kafka_txn:
v1 and v2); one test runs a Spark job and plays its zombie afterwards. Each test prints how
long the LSO stayed behind the high watermark; only generous deadlines are asserted."""
import logging
import time

import pytest

from pyprod import errors
from pyprod.spark import options, transactions
from pyprod.spark import writer as task_writer
from pyprod.spark.datasource import PyprodCommitMessage
from tests.harness import readback
from tests.spark.test_spark_exactly_once import _Context, failing_udf, prefix, read

TIMEOUT_MS = 10_000  # kafka.transaction.timeout.ms here: kafka_txn aborts timed-out ones in 0.5 s


def _settings(cluster, txn_prefix=None, run_id=None):
    from pyspark.sql.types import StringType, StructField, StructType
    sink = options.parse_sink({"kafka.bootstrap.servers": cluster.bootstrap_servers,
                               "exactlyOnce": "true",
                               "transactionalIdPrefix": txn_prefix or prefix(),
                               "kafka.transaction.timeout.ms": str(TIMEOUT_MS)})
    txn = transactions.for_batch(sink.transactional_id_prefix)
    if run_id is not None:  # the run of a write Spark planned
        txn = transactions.TransactionSettings(txn.prefix, run_id=run_id)
    return task_writer.settings_for(StructType([StructField("value", StringType())]),
                                    "unused", sink.configs, txn)


def _values(tag, partition, n=50):
    return [b"%s-%d-%d" % (tag, partition, i) for i in range(n)]


def _sends(topic, partition, values):
    return (topic, len(values), {"values": values, "partitions": [partition] * len(values)})


def _task(settings, topic, partition, chunks, factory=None, sent=None):
    """A task attempt of ``partition`` writing ``chunks`` (lists of values, or callables run
    between them: what the driver does meanwhile) -> its commit message. ``sent``: a list that
    gets the monotonic time each chunk was handed to send_batch."""
    task = transactions.current_task(settings.transactions, _Context(partition, None, None))

    def sends():
        for chunk in chunks:
            if callable(chunk):
                chunk()
                continue
            if sent is not None:
                sent.append(time.monotonic())
            yield _sends(topic, partition, chunk)
    records, prepared = transactions.write(settings, sends(), task.transactional_id, factory)
    return PyprodCommitMessage(records, prepared, partition, task.scope, None)


class _Offsets:
    """The LSO (read_committed end offsets) and the high watermarks of a topic's partitions,
    asked again and again by two kafka-python consumers."""

    def __init__(self, bootstrap, topic, partitions=2):
        from kafka import KafkaConsumer, TopicPartition
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumers = [KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                        isolation_level=level)
                          for level in ("read_committed", "read_uncommitted")]

    def ends(self):
        """(LSOs, high watermarks), each {partition: offset}."""
        return tuple({tp.partition: off for tp, off in c.end_offsets(self.tps).items()}
                     for c in self.consumers)

    def held_back(self):
        lso, hwm = self.ends()
        return lso != hwm

    def until_stable(self, deadline_s=60.0):
        """Poll until LSO == HWM on every partition; the monotonic time it was seen."""
        end = time.monotonic() + deadline_s
        while self.held_back():
            assert time.monotonic() < end, "the LSO is still held back after %.0f s" % deadline_s
            time.sleep(0.01)
        return time.monotonic()

    def close(self):
        for c in self.consumers:
            c.close()


@pytest.fixture
def offsets():
    made = []

    def make(cluster, topic, partitions=2):
        made.append(_Offsets(cluster.bootstrap_servers, topic, partitions))
        return made[-1]
    yield make
    for o in made:
        o.close()


def _zombie_values(records):
    return [r.value for r in records if r.value.startswith(b"zombie")]


def _report(what, kafka_txn, text):
    print("\n[zombie] transactions v%d, %s: %s" % (kafka_txn.transaction_version, what, text))


def _fenced(error):
    """A fenced producer's error: the records' (BatchDeliveryError) or its own."""
    causes = [e for _, e in error.failures] if isinstance(error, errors.BatchDeliveryError) \
        else [error]
    return causes and all(isinstance(e, (errors.InvalidProducerEpochError,
                                         errors.ProducerFencedError)) for e in causes)


def test_a_zombie_after_the_abort_writes_nothing_and_raises(kafka_txn, topic, offsets):
    """The driver aborted the run (partition 1 failed); an attempt of partition 1 starts after:
    it finds the run closed before its InitProducerId and raises JobEndedError."""
    t = topic(2, cluster=kafka_txn)
    settings = _settings(kafka_txn)
    ok = _task(settings, t, 0, [_values(b"ok", 0)])
    result = transactions.abort_batch(settings, [ok, None])
    assert result == {"transactions": 1, "aborted": 1, "fenced": 1, "fenced_reported": 1,
                      "run_closed": True}
    watch = offsets(kafka_txn, t)
    before = watch.ends()
    t0 = time.monotonic()
    with pytest.raises(transactions.JobEndedError, match="already committed or aborted") as info:
        _task(settings, t, 1, [_values(b"zombie", 1)])
    took = time.monotonic() - t0
    assert "was about to write" in str(info.value) and "it wrote nothing" in str(info.value)
    assert watch.ends() == before and before[0] == before[1]  # nothing written, nothing open
    _report("zombie started after the abort", kafka_txn,
            "wrote nothing (LSO never behind); its call took %.2f s" % took)
    assert read(kafka_txn.bootstrap_servers, t, timeout=10) == []
    everything = read(kafka_txn.bootstrap_servers, t, committed=False, timeout=10)
    assert len(everything) == 50 and _zombie_values(everything) == []


def test_a_late_duplicate_during_and_after_the_commit_writes_nothing(kafka_txn, topic,
                                                                     offsets):
    """A duplicate attempt of partition 1 starts once the driver has marked the run, before it
    commits: it does not fence partition 1's prepared transaction (it asks before its
    InitProducerId), so the commit succeeds; another starts after the commit. Nothing of them
    is visible, and the LSO is not held back."""
    t = topic(2, cluster=kafka_txn)
    settings = _settings(kafka_txn)
    msgs = [_task(settings, t, p, [_values(b"ok", p)]) for p in (0, 1)]
    watch = offsets(kafka_txn, t)
    assert transactions.close_run(settings)  # commit_batch's first step
    with pytest.raises(transactions.JobEndedError):
        _task(settings, t, 1, [_values(b"zombie", 1)])
    assert transactions.commit_batch(settings, msgs) == {
        "transactions": 2, "committed": 2, "run_closed": True}
    watch.until_stable(deadline_s=30)  # the commit markers
    before = watch.ends()
    with pytest.raises(transactions.JobEndedError):
        _task(settings, t, 1, [_values(b"zombie", 1)])
    assert watch.ends() == before
    _report("late duplicates during and after the commit", kafka_txn,
            "wrote nothing (LSO never behind), the commit succeeded")
    got = read(kafka_txn.bootstrap_servers, t, expected_count=100, timeout=30)
    assert sorted(r.value for r in got) == sorted(_values(b"ok", 0) + _values(b"ok", 1))
    assert _zombie_values(read(kafka_txn.bootstrap_servers, t, committed=False)) == []


def test_a_zombie_writing_when_the_run_closes_aborts_itself_after_its_flush(kafka_txn, topic,
                                                                             offsets):
    """The attempt began before the run was marked closed and the driver's fences never came
    (it died right after the mark): the attempt finds the mark after its flush, aborts its
    transaction and raises. Its rows are in the log, aborted."""
    t = topic(2, cluster=kafka_txn)
    settings = _settings(kafka_txn)
    watch = offsets(kafka_txn, t)
    sent = []

    def close():  # the driver, between the zombie's two chunks
        assert transactions.close_run(settings)
    with pytest.raises(transactions.JobEndedError, match="had written 100 records") as info:
        _task(settings, t, 1, [_values(b"zombie", 1), close, _values(b"zombie2", 1)],
              sent=sent)
    returned = time.monotonic()
    assert "its records are aborted" in str(info.value)
    stable = watch.until_stable()
    _report("zombie writing while the run closed", kafka_txn,
            "LSO == HWM %.2f s after its first send_batch, %.3f s after its call returned "
            "(its call: %.2f s from the first send)"
            % (stable - sent[0], stable - returned, returned - sent[0]))
    assert read(kafka_txn.bootstrap_servers, t, timeout=10) == []
    assert len(read(kafka_txn.bootstrap_servers, t, committed=False, timeout=10)) == 100


def test_a_zombie_begun_before_the_abort_is_fenced(kafka_txn, topic, offsets):
    """The attempt did its InitProducerId and wrote a first chunk before the driver aborted the
    run: the driver's fence aborts its transaction, and its next records fail with a typed
    error (not JobEndedError: the fence got there first)."""
    t = topic(2, cluster=kafka_txn)
    settings = _settings(kafka_txn)
    ok = _task(settings, t, 0, [_values(b"ok", 0)])
    made = []

    def factory(config):
        made.append(transactions.new_producer(config))
        return made[-1]

    def abort():
        made[0].flush()  # the first chunk is in the log, in the open transaction
        assert transactions.abort_batch(settings, [ok, None])["fenced"] == 1
    with pytest.raises(errors.KafkaError) as info:
        _task(settings, t, 1, [_values(b"zombie", 1), abort, _values(b"zombie2", 1)],
              factory=factory)
    assert not isinstance(info.value, transactions.JobEndedError)
    assert _fenced(info.value), repr(info.value)
    _report("attempt begun before the abort", kafka_txn, "%s: %s"
            % (type(info.value).__name__, str(info.value)[:120]))
    offsets(kafka_txn, t).until_stable(deadline_s=30)
    assert read(kafka_txn.bootstrap_servers, t, timeout=10) == []
    everything = read(kafka_txn.bootstrap_servers, t, committed=False, timeout=10)
    assert sorted(_zombie_values(everything)) == sorted(_values(b"zombie", 1))


def test_without_the_mark_a_late_zombie_holds_the_lso_until_the_transaction_timeout(
        kafka_txn, topic, offsets):
    """What a late zombie did before the mark (and still does on brokers without
    DescribeTransactions): its prepared transaction stays open until transaction_timeout_ms
    (10 s here) and holds back read_committed readers all that time."""
    t = topic(2, cluster=kafka_txn)
    settings = _settings(kafka_txn)
    transactions.abort_batch(settings, [None, None])
    tid = transactions.transactional_id(settings.transactions.prefix,
                                        settings.transactions.run_id, 1)
    producer = transactions.new_producer(dict(settings.configs, transactional_id=tid))
    try:  # the task as it was: no check
        producer.init_transactions()
        producer.begin_transaction()
        t0 = time.monotonic()
        producer.send_batch(t, _values(b"zombie", 1), partitions=[1] * 50)
        producer.flush()
        producer.prepare_transaction()
    finally:
        producer.close()
    watch = offsets(kafka_txn, t)
    assert watch.held_back(), "the zombie's open transaction should hold back the LSO"
    lag = watch.until_stable(deadline_s=TIMEOUT_MS / 1000 + 60) - t0
    _report("late zombie without the check (transaction.timeout.ms=%d)" % TIMEOUT_MS,
            kafka_txn, "LSO == HWM %.2f s after its first send_batch" % lag)
    assert read(kafka_txn.bootstrap_servers, t, timeout=10) == []


def test_brokers_without_describe_transactions_write_as_before(mock_cluster, caplog):
    """librdkafka's mock cluster has no DescribeTransactions (as Kafka < 3.0): the task goes
    on (a warning says late zombies are bounded by transaction_timeout_ms only) and the
    write commits. Read back by confluent-kafka (kafka-python cannot read the mock's
    ApiVersions answer)."""
    mock_cluster.topic_create("t", 2)

    class Cluster:
        bootstrap_servers = mock_cluster.cluster_bootstraps()
    settings = _settings(Cluster)
    transactions._no_describe.clear()
    with caplog.at_level(logging.WARNING, logger="pyprod.spark.commit"):
        msgs = [_task(settings, "t", p, [_values(b"ok", p)]) for p in (0, 1)]
    assert [m.records for m in msgs] == [50, 50]
    assert transactions.commit_batch(settings, msgs)["committed"] == 2
    warned = [r.getMessage() for r in caplog.records if "no DescribeTransactions" in
              r.getMessage()]
    assert len(warned) == 1 and "transaction_timeout_ms" in warned[0], warned
    got = readback.read_all_confluent(Cluster.bootstrap_servers, "t", expected_count=100,
                                      timeout=30, **{"isolation.level": "read_committed"})
    assert sorted(r.value for r in got) == sorted(_values(b"ok", 0) + _values(b"ok", 1))


# -- with Spark ----------------------------------------------------------------------------------
def _sentinels(bootstrap, txn_prefix):
    """The transactional ids ``<prefix>-<run>-closed`` the brokers know (kafka-python's admin:
    ListTransactions, then DescribeTransactions): {id: state}."""
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_transactions(transactional_id_pattern=txn_prefix + "-.*-closed")
        ids = [t.transactional_id for ts in listed.values() for t in ts]
        return {tid: str(d.state) for tid, d in admin.describe_transactions(ids).items()}
    finally:
        admin.close()


def _save(activate, df, bootstrap, topic, txn_prefix):
    activate(df.sparkSession)
    df.write.format("pyprod").mode("append").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).option("exactlyOnce", "true") \
        .option("transactionalIdPrefix", txn_prefix).save()


def test_spark_jobs_close_their_runs_and_their_zombies_write_nothing(spark, kafka, topic,
                                                                      activate, offsets):
    """A Spark job that fails (partition 1 raises on every attempt) and one that commits: each
    leaves its run's mark, found with kafka-python's admin client; an attempt of partition 1
    of either run started afterwards raises JobEndedError, and nothing of it is visible."""
    t = topic(2)
    n = 2000
    failing = spark.range(0, n, numPartitions=2).select(failing_udf(
        lambda i, partition, attempt: "raise" if partition == 1 and i == n - 1 else None,
        sleep_s=0.5)("id").alias("value"))
    ok = spark.range(0, n, numPartitions=2).selectExpr("cast(id as string) as value")
    aborted, committed = prefix(), prefix()
    with pytest.raises(Exception, match="injected failure of partition 1"):
        _save(activate, failing, kafka.bootstrap_servers, t, aborted)
    _save(activate, ok, kafka.bootstrap_servers, t, committed)
    watch = offsets(kafka, t)
    for txn_prefix in (aborted, committed):
        marks = _sentinels(kafka.bootstrap_servers, txn_prefix)
        assert len(marks) == 1 and "EMPTY" in list(marks.values())[0].upper(), marks
        run_id = list(marks)[0][len(txn_prefix) + 1:-len("-closed")]
        settings = _settings(kafka, txn_prefix, run_id)
        with pytest.raises(transactions.JobEndedError, match=run_id):
            _task(settings, t, 1, [_values(b"zombie", 1)])
        assert not watch.held_back()
    got = read(kafka.bootstrap_servers, t, expected_count=n, timeout=60)
    assert sorted(int(r.value) for r in got) == list(range(n))
    assert _zombie_values(read(kafka.bootstrap_servers, t, committed=False)) == []
