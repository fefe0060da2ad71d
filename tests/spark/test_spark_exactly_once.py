"""format("pyprod") with exactlyOnce: tasks write in transactions the driver commits (or
aborts), read back by kafka-python with isolation_level=read_committed (and read_uncommitted,
where the aborted or fenced rows show).

The session runs local[2,2]: a failed task gets one retry. Failures are injected by a UDF
upstream of the sink on the first attempt of one partition, after the rows before it reached
Kafka; the driver-side recovery of a streaming batch left half-committed is driven directly
(no Spark), on both transaction protocols (kafka_txn: v1 and v2)."""
import collections
import json
import os
import sys
import time
import uuid

import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

from pyprod.errors import KafkaConfigurationError
from pyprod.spark import options, transactions
from pyprod.spark.datasource import PyprodCommitMessage
from tests.harness import readback
from tests.harness.readback import end_offsets

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the UDFs, for the workers


def read(bootstrap, topic, committed=True, **kw):
    return readback.read_all_kafka_python(
        bootstrap, topic, isolation_level="read_committed" if committed else "read_uncommitted",
        **kw)


def ids(records):
    return collections.Counter(int(r.value) for r in records)


def prefix():
    return "eos-test-" + uuid.uuid4().hex[:8]


@pytest.fixture
def eos_writer(activate):
    def make(df, bootstrap, topic, **kafka):
        activate(df.sparkSession)
        w = df.write.format("pyprod").mode("append") \
            .option("kafka.bootstrap.servers", bootstrap).option("topic", topic) \
            .option("exactlyOnce", "true").option("transactionalIdPrefix", prefix())
        for k, v in kafka.items():
            w = w.option("kafka." + k.replace("_", "."), v)
        return w
    return make


def failing_udf(fail, sleep_s=3.0):
    """A UDF passing the id through as a string; ``fail(id, partition, attempt)`` -> None, or
    "raise" / "exit" (the Python worker dies: os._exit), after ``sleep_s`` (so the rows before
    reach Kafka first)."""
    @F.udf("string")
    def value(i):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        how = fail(i, ctx.partitionId(), ctx.attemptNumber())
        if how is not None:
            time.sleep(sleep_s)
            if how == "exit":
                os._exit(17)
            raise RuntimeError("injected failure of partition %d, attempt %d"
                               % (ctx.partitionId(), ctx.attemptNumber()))
        return str(i)
    return value


N = 300_000  # two partitions of 150k; the failures come at 120k: the first 100k went out


def test_failed_first_attempts_are_fenced_and_every_row_is_committed_once(
        spark, kafka, topic, eos_writer, worker_logs):
    """Partition 0 raises on its first attempt, partition 1's worker dies (os._exit) on its
    first: both retried; read_committed sees every row once, read_uncommitted also the rows
    the failed attempts wrote before they failed (aborted by the retries' InitProducerId)."""
    t = topic(3)
    half = N // 2
    fail_at = {0: 120_000, 1: half + 120_000}

    def fail(i, partition, attempt):
        if attempt == 0 and i == fail_at[partition]:
            return "raise" if partition == 0 else "exit"
        return None

    df = spark.range(0, N, numPartitions=2).select(failing_udf(fail)("id").alias("value"))
    eos_writer(df, kafka.bootstrap_servers, t, linger_ms=5).save()

    got = ids(read(kafka.bootstrap_servers, t, expected_count=N, timeout=120))
    assert len(got) == N and max(got.values()) == 1, "rows missing or written twice"
    assert set(got) == set(range(N))
    everything = ids(read(kafka.bootstrap_servers, t, committed=False, timeout=120))
    extra = everything - got  # the failed attempts' rows, in the log but aborted
    assert all(i < fail_at[0] or half <= i < fail_at[1] for i in extra), sorted(extra)[:5]
    assert any(i < half for i in extra) and any(i >= half for i in extra), \
        "a failed attempt wrote nothing before failing: nothing to fence (%d extra)" % len(extra)
    assert end_offsets(kafka.bootstrap_servers, t, True) == \
        end_offsets(kafka.bootstrap_servers, t, False)  # no transaction left open
    assert any("(exactly once: 2 transactions)" in m for m in worker_logs(t)), worker_logs(t)


def test_a_failed_job_is_aborted_and_leaves_nothing_visible(spark, kafka, topic, eos_writer,
                                                            worker_logs):
    """Partition 1 fails on every attempt (after writing), partition 0 succeeds: the job fails
    and the driver's abort() aborts partition 0's prepared transaction and fences partition 1's
    transactional id: read_committed sees nothing, and no transaction stays open."""
    t = topic(2)
    n = 40_000

    def fail(i, partition, attempt):
        return "raise" if partition == 1 and i == n - 1 else None

    df = spark.range(0, n, numPartitions=2).select(
        failing_udf(fail, sleep_s=2.0)("id").alias("value"))
    with pytest.raises(Exception) as info:
        eos_writer(df, kafka.bootstrap_servers, t).save()
    assert "injected failure of partition 1" in str(info.value)
    assert read(kafka.bootstrap_servers, t, timeout=30) == []
    written = ids(read(kafka.bootstrap_servers, t, committed=False, timeout=30))
    assert written, "nothing written: the test proves nothing"
    assert end_offsets(kafka.bootstrap_servers, t, True) == \
        end_offsets(kafka.bootstrap_servers, t, False)  # aborted, not left open
    logs = [m for m in worker_logs(t) if "aborted;" in m]
    assert logs and "exactly once:" in logs[-1], worker_logs(t)
    assert "1 failed tasks' transactional ids fenced" in logs[-1], logs[-1]


def _committed_batches(checkpoint):
    return sorted(int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit())


ROWS_PER_BATCH = 3000


def test_stream_restarted_after_a_crash_between_the_sinks_commit_and_spark_s(
        spark, kafka, topic, tmp_path, activate):
    """A streaming query runs one micro-batch per start (trigger once) from its checkpoint.
    After batch 1, its entry is removed from Spark's commit log (and the sink's entry set
    back to "committing"), as a crash during the sink's commit leaves them: the next start
    finishes the commit when it plans batch 1 again, and aborts the re-run's transactions.
    Then as a crash between the sink's commit and Spark's commit log: batch 1 runs again and
    its re-run is aborted. Every row once under read_committed; the re-runs' rows show under
    read_uncommitted only."""
    t = topic(3)
    checkpoint = tmp_path / "checkpoint"
    txn_prefix = prefix()

    def run():
        """One start of the query: one micro-batch; its progress."""
        activate(spark)
        rows = (spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", ROWS_PER_BATCH).option("numPartitions", 2).load())
        query = (rows.select(F.col("value").cast("string").alias("value"))
                 .writeStream.format("pyprod").queryName("pyprod_eos")
                 .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                 .option("topic", t).option("exactlyOnce", "true")
                 .option("transactionalIdPrefix", txn_prefix)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(once=True).start())
        try:
            assert query.awaitTermination(180), "the query did not finish its batch"
            assert query.exception() is None, query.exception()
            return [p for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()

    assert [p["batchId"] for p in run()] == [0]
    assert [p["batchId"] for p in run()] == [1]
    assert _committed_batches(checkpoint) == [0, 1]
    entry = json.loads((checkpoint / "pyprod" / "1.json").read_text())
    assert entry["state"] == "committed" and entry["batch_id"] == 1
    assert sorted(tid for tid, *_ in entry["transactions"]) == [
        "%s-%s-%d" % (txn_prefix, entry["query_id"], p) for p in (0, 1)]

    def drop_commit(batch_id):
        """The crash: Spark never logged the batch's commit (after the sink's commit)."""
        for name in ("%d" % batch_id, ".%d.crc" % batch_id):
            path = checkpoint / "commits" / name
            if path.exists():
                path.unlink()

    # batch 1 as a crash in the middle of the sink's commit leaves it: decided, not finished.
    # Its transactions are committed here, which recover() cannot tell from open ones: it
    # commits them again, and must do so before the re-run's tasks fence them (else they
    # would count as lost, and the re-run's rows would be committed too).
    path = checkpoint / "pyprod" / "1.json"
    path.write_text(json.dumps(dict(entry, state="committing")))
    drop_commit(1)
    assert [p["batchId"] for p in run()] == [1], "Spark did not run batch 1 again"
    entry = json.loads(path.read_text())
    assert entry["state"] == "committed" and entry["lost"] == [] and "unknown" not in entry, entry
    # batch 1 as a crash between the sink's commit and Spark's commit log leaves it
    drop_commit(1)
    assert [p["batchId"] for p in run()] == [1], "Spark did not run batch 1 again"
    assert [p["batchId"] for p in run()] == [2]
    assert _committed_batches(checkpoint) == [0, 1, 2]

    total = ROWS_PER_BATCH * 3  # rate-micro-batch: batch b is b*R .. (b+1)*R - 1
    got = ids(read(kafka.bootstrap_servers, t, expected_count=total, timeout=120))
    assert max(got.values()) == 1, "rows written twice"
    assert set(got) == set(range(total))
    everything = ids(read(kafka.bootstrap_servers, t, committed=False, timeout=120))
    assert everything - got == collections.Counter(
        2 * list(range(ROWS_PER_BATCH, 2 * ROWS_PER_BATCH))), \
        "batch 1's two re-runs should be in the log, aborted"
    assert end_offsets(kafka.bootstrap_servers, t, True) == \
        end_offsets(kafka.bootstrap_servers, t, False)


def test_stream_needs_its_checkpoint_as_an_option(spark, kafka, topic, activate, tmp_path):
    activate(spark)
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "root"))
    try:
        query = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
                 .select(F.col("value").cast("string").alias("value"))
                 .writeStream.format("pyprod").queryName("pyprod_eos_no_checkpoint")
                 .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                 .option("topic", topic(1)).option("exactlyOnce", "true").start())
        try:
            with pytest.raises(Exception, match="checkpointLocation"):
                query.awaitTermination(120)
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")


# -- the driver's side, without Spark ------------------------------------------------------------
class _Context:
    """A TaskContext stand-in for transactions.current_task."""

    def __init__(self, partition, query_id, batch_id):
        self._p, self._props = partition, {transactions.QUERY_ID_PROPERTY: query_id,
                                           transactions.BATCH_ID_PROPERTY: str(batch_id)}

    def partitionId(self):
        return self._p

    def getLocalProperty(self, key):
        return self._props.get(key)


def _stream_settings(cluster, tmp_path, **kafka):
    query_id = str(uuid.uuid4())
    checkpoint = tmp_path / "chk"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    from pyprod.spark import writer as task_writer
    from pyspark.sql.types import StringType, StructField, StructType
    sink = options.parse_sink(dict({"kafka.bootstrap.servers": cluster.bootstrap_servers,
                                    "exactlyOnce": "true", "transactionalIdPrefix": prefix(),
                                    "checkpointLocation": str(checkpoint)},
                                   **{"kafka." + k: v for k, v in kafka.items()}),
                              streaming=True)
    txn = transactions.for_stream(sink.transactional_id_prefix, sink.checkpoint_location)
    assert txn.query_id == query_id
    return task_writer.settings_for(StructType([StructField("value", StringType())]),
                                    "unused", sink.configs, txn)


def _task(settings, topic, partition, batch_id, values):
    """What a task does: its rows in a prepared transaction -> its commit message."""
    txn = settings.transactions
    task = transactions.current_task(txn, _Context(partition, txn.query_id, batch_id))
    records, prepared = transactions.write(
        settings, [(topic, len(values), {"values": values, "partitions": [partition] * len(
            values)})], task.transactional_id)
    return PyprodCommitMessage(records, prepared, partition, task.scope, batch_id)


def _values(batch, partition, n=100):
    return [b"%d" % (batch * 1000 + partition * 100 + i) for i in range(n)]


def test_stream_batch_half_committed_by_a_crash_is_finished_before_its_rerun(
        kafka_txn, topic, tmp_path):
    """commit(messages, 5) crashed after its decision and one EndTxn: the restarted query's
    planning (recover) commits the rest, the re-run's commit aborts the re-run's transactions.
    Both transaction protocols."""
    t = topic(2, cluster=kafka_txn)
    settings = _stream_settings(kafka_txn, tmp_path)
    sink_log = transactions.SinkLog(settings.transactions.checkpoint)
    messages = [_task(settings, t, p, 5, _values(5, p)) for p in (0, 1)]
    assert messages[0].transaction.transaction_version == kafka_txn.transaction_version
    # the crash: decided, the first transaction committed, then nothing
    sink_log.put({"version": 1, "batch_id": 5, "query_id": settings.transactions.query_id,
                  "state": "committing",
                  "transactions": [list(m.transaction) for m in messages]})
    transactions.finish(settings.configs, messages[0].transaction, commit=True)
    assert len(read(kafka_txn.bootstrap_servers, t, expected_count=100, timeout=5)) == 100

    entry = transactions.recover(settings)  # the restarted query plans batch 5 again
    assert entry["state"] == "committed" and entry["lost"] == []
    assert transactions.recover(settings) is None  # nothing left to finish
    rerun = [_task(settings, t, p, 5, _values(5, p)) for p in (0, 1)]
    result = transactions.commit_stream(settings, rerun, 5)
    assert result["already_committed"] and result["aborted"] == 2
    assert result["records_committed"] == 0
    want = sorted(v for p in (0, 1) for v in _values(5, p))
    assert sorted(r.value for r in read(kafka_txn.bootstrap_servers, t, expected_count=200)) \
        == want
    assert len(read(kafka_txn.bootstrap_servers, t, committed=False)) == 400

    nxt = [_task(settings, t, p, 6, _values(6, p)) for p in (0, 1)]  # and on it goes
    assert transactions.commit_stream(settings, nxt, 6) == {"transactions": 2, "committed": 2}
    assert sink_log.get(6)["state"] == "committed"
    assert len(read(kafka_txn.bootstrap_servers, t, expected_count=400)) == 400


def test_stream_batch_whose_transaction_timed_out_is_rewritten_by_its_rerun(
        kafka_txn, topic, tmp_path):
    """The restart came after the broker aborted one of the decided batch's transactions
    (transaction_timeout_ms): recover() records it as lost, and the re-run's commit commits
    that partition's new transaction while aborting the others."""
    t = topic(2, cluster=kafka_txn)
    settings = _stream_settings(kafka_txn, tmp_path, **{"transaction.timeout.ms": "1500"})
    sink_log = transactions.SinkLog(settings.transactions.checkpoint)
    messages = [_task(settings, t, p, 0, _values(0, p)) for p in (0, 1)]
    sink_log.put({"version": 1, "batch_id": 0, "query_id": settings.transactions.query_id,
                  "state": "committing",
                  "transactions": [list(m.transaction) for m in messages]})
    transactions.finish(settings.configs, messages[0].transaction, commit=True)
    time.sleep(4)  # the coordinator aborts partition 1's (timed-out check every 500 ms here)

    entry = transactions.recover(settings)
    lost = "%s-%s-1" % (settings.transactions.prefix, settings.transactions.query_id)
    assert entry["lost"] == [lost]
    rerun = [_task(settings, t, p, 0, _values(0, p)) for p in (0, 1)]
    result = transactions.commit_stream(settings, rerun, 0)
    assert result["already_committed"] and result["committed"] == 1 and result["aborted"] == 1
    assert result["records_committed"] == 100
    assert sink_log.get(0)["lost"] == [] and sink_log.get(0)["rewritten"] == [lost]
    got = sorted(r.value for r in read(kafka_txn.bootstrap_servers, t, expected_count=200))
    assert got == sorted(_values(0, 0) + _values(0, 1))


def test_stream_abort_leaves_a_decided_batch_and_fences_failed_partitions(
        kafka_txn, topic, tmp_path):
    t = topic(2, cluster=kafka_txn)
    settings = _stream_settings(kafka_txn, tmp_path)
    ok = _task(settings, t, 0, 3, _values(3, 0))
    # partition 1 failed after writing: its transaction is open, no message
    failed = _task(settings, t, 1, 3, _values(3, 1))
    result = transactions.abort_stream(settings, [ok, None], 3)
    assert result == {"transactions": 1, "aborted": 1, "fenced": 1}
    assert read(kafka_txn.bootstrap_servers, t, timeout=5) == []
    assert end_offsets(kafka_txn.bootstrap_servers, t, True) == \
        end_offsets(kafka_txn.bootstrap_servers, t, False)
    with pytest.raises(Exception):  # fenced: the failed attempt's transaction is gone
        transactions.finish(settings.configs, failed.transaction, commit=True)

    # a batch whose commit failed after its decision: abort() leaves it to recover()
    msgs = [_task(settings, t, p, 4, _values(4, p)) for p in (0, 1)]
    transactions.SinkLog(settings.transactions.checkpoint).put({
        "version": 1, "batch_id": 4, "query_id": settings.transactions.query_id,
        "state": "committing", "transactions": [list(m.transaction) for m in msgs]})
    assert transactions.abort_stream(settings, msgs, 4)["aborted"] == 0
    assert transactions.recover(settings)["lost"] == []
    assert len(read(kafka_txn.bootstrap_servers, t, expected_count=200)) == 200


# -- options -----------------------------------------------------------------------------------
BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("flag, name", [("exactlyOnce", "transactionalIdPrefix"),
                                        ("exactly_once", "transactional.id.prefix"),
                                        ("EXACTLYONCE", "transactional_id_prefix")])
def test_exactly_once_options(flag, name):
    sink = options.parse_sink(dict(BS, topic="t", **{flag: "true", name: " jobs-a "}))
    assert sink.exactly_once and sink.transactional_id_prefix == "jobs-a"
    assert sink.configs["transaction_timeout_ms"] == 900000
    assert "transactional_id" not in sink.configs
    sink = options.parse_sink(dict(BS, exactlyOnce="true", **{"kafka.transaction.timeout.ms":
                                                              "120000"}))
    assert sink.transactional_id_prefix == "pyprod-spark"
    assert sink.configs["transaction_timeout_ms"] == 120000
    default = options.parse_sink(BS)
    assert not default.exactly_once and default.transactional_id_prefix is None
    assert options.parse_sink(dict(BS, exactlyOnce="false")).configs == {
        "bootstrap_servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("opts, needle", [
    ({"kafka.transactional.id": "x"}, "every task needs a transactional id of its own"),
    ({"transactionalIdPrefix": "p"}, "needs option 'exactlyOnce'"),
    ({"exactlyOnce": "maybe"}, "expected true or false"),
    ({"exactlyOnce": "true", "kafka.acks": "1"}, "acks"),
    ({"exactlyOnce": "true", "kafka.enable.idempotence": "false"}, "idempotence"),
    ({"exactlyOnce": "true", "transactionalIdPrefix": " "}, "non-empty"),
    ({"exactlyOnce": "true", "exactly_once": "true"}, "set twice"),
])
def test_bad_exactly_once_options(opts, needle):
    with pytest.raises(KafkaConfigurationError, match=needle):
        options.parse_sink(dict(BS, **opts))


def test_the_sink_log_files(tmp_path):
    """Entries are replaced whole, listed by batch id, and pruned to the newest ones; a
    file: URI and pyarrow's file system read the same files."""
    (tmp_path / "metadata").write_text('{"id":"q-1"}\n')
    sink_log = transactions.SinkLog(str(tmp_path))
    assert sink_log.query_id() == "q-1" and sink_log.latest() is None
    for b in range(25):
        sink_log.put({"batch_id": b, "state": "committed", "transactions": []})
    sink_log.prune()
    assert sink_log.batch_ids() == list(range(5, 25))
    assert sorted(os.listdir(tmp_path / "pyprod")) == sorted("%d.json" % b for b in range(5, 25))
    uri = transactions.SinkLog("file://" + str(tmp_path))
    assert uri.latest()["batch_id"] == 24
    files = transactions._Files.__new__(transactions._Files)  # the pyarrow.fs path
    import pyarrow.fs as pafs
    files.fs, files.root, files._pafs, files.location = pafs.LocalFileSystem(), str(tmp_path), \
        pafs, str(tmp_path)
    files.write(b"x", "pyprod", "99.json")
    assert files.read("pyprod", "99.json") == b"x" and "99.json" in files.list("pyprod")
    files.delete("pyprod", "99.json")
    assert files.read("pyprod", "99.json") is None
    with pytest.raises(transactions.ExactlyOnceError, match="cannot see Spark's checkpoint"):
        transactions.SinkLog(str(tmp_path / "nowhere")).query_id()
