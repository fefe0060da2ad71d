"""format("pyprod") and pyprod.spark.publish over Spark Connect: a remote session
(pyspark.sql.connect.session.SparkSession) on a Connect server started from pyspark's jars;
the server's Python workers run the sink. Read back by kafka-python (read_committed for
exactlyOnce): every row exactly once, with its key, value, headers and timestamp."""
import collections
import json
import uuid

import pytest
from kafka.partitioner.default import murmur2
from pyspark.sql import functions as F

import pyprod.spark
from pyprod.spark.datasource import PyprodDataSource
from tests.harness import readback

TS0 = 1_650_000_000_000


@pytest.fixture(scope="module")
def spark(spark_connect):
    """The remote session with format("pyprod") registered (once per server session)."""
    assert pyprod.spark.register(spark_connect) is PyprodDataSource
    return spark_connect


def frame(spark, n, parts=2):
    """n rows over ``parts`` tasks (contiguous id ranges): key, value, headers, timestamp."""
    return spark.range(0, n, numPartitions=parts).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.array(F.struct(F.lit("i").alias("key"), F.col("id").cast("string").cast("binary")
                         .alias("value"))).alias("headers"),
        F.timestamp_millis(F.lit(TS0) + F.col("id")).alias("timestamp"))


def check_rows(read, n, partitions, parts=2):
    """Every id of 0..n-1 once, with its key/value/header/timestamp, in the key's partition
    (murmur2, as Kafka's Java client), and each task's rows in order within a partition."""
    readback.compare([readback.Sent(b"%d" % i, b"v%d" % i, [("i", b"%d" % i)], TS0 + i)
                      for i in range(n)], read)
    task_of = {}
    per_task = -(-n // parts)
    for r in read:
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % partitions, r
    for r in sorted(read, key=lambda r: (r.partition, r.offset)):
        i = int(r.key)
        group = (r.partition, i // per_task)
        assert task_of.get(group, -1) < i, "task order broken in partition %d" % r.partition
        task_of[group] = i


def read_committed(bootstrap, topic, n):
    return readback.read_all_kafka_python(bootstrap, topic, expected_count=n, timeout=120,
                                          isolation_level="read_committed")


def writer(df, bootstrap, topic, **options):
    w = df.write.format("pyprod").mode("append") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def commit_logs(spark, needle):
    """The "pyprod.spark.commit" messages (commit()'s totals) in the server's worker logs."""
    rows = spark.tvf.python_worker_logs().where("logger = 'pyprod.spark.commit'") \
        .select("msg").collect()
    return [r.msg for r in rows if needle in r.msg]


def test_the_session_is_a_connect_session(spark):
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
    assert isinstance(spark, RemoteSparkSession)
    assert pyprod.spark.register(spark) is PyprodDataSource  # again: replaces, no error


def test_batch_write_every_row_once(spark, kafka, topic):
    t = topic(4)
    n = 40_000
    writer(frame(spark, n), kafka.bootstrap_servers, t, **{"kafka.linger.ms": "5"}).save()
    check_rows(readback.read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=n,
                                              timeout=120), n, 4)
    assert any("committed %d records from 2 tasks to %r" % (n, t) in m
               for m in commit_logs(spark, t)), commit_logs(spark, t)


def test_batch_exactly_once(spark, kafka_txn, topic):
    t = topic(3, cluster=kafka_txn)
    n = 30_000
    writer(frame(spark, n), kafka_txn.bootstrap_servers, t, exactlyOnce="true",
           transactionalIdPrefix="connect-" + uuid.uuid4().hex[:8]).save()
    check_rows(read_committed(kafka_txn.bootstrap_servers, t, n), n, 3)
    readback.assert_no_open_transaction(kafka_txn.bootstrap_servers, t)
    assert any("(exactly once: 2 transactions)" in m for m in commit_logs(spark, t))


ROWS_PER_BATCH = 4000


def test_stream_exactly_once_from_its_checkpoint(spark, kafka_txn, topic, tmp_path):
    """A rate-micro-batch stream, one micro-batch per start (trigger once), started twice
    from its checkpoint: batches 0 and 1, each row once under read_committed."""
    t = topic(3, cluster=kafka_txn)
    checkpoint = tmp_path / "checkpoint"  # the server runs on this machine: a local path
    txn_prefix = "connect-stream-" + uuid.uuid4().hex[:8]

    def run():
        rows = (spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", ROWS_PER_BATCH).option("numPartitions", 2).load())
        df = rows.select(F.col("value").cast("string").alias("value"),
                         F.concat(F.lit("k"), (F.col("value") % 97).cast("string")).alias("key"))
        query = (df.writeStream.format("pyprod").queryName("pyprod_connect_eos")
                 .option("kafka.bootstrap.servers", kafka_txn.bootstrap_servers)
                 .option("topic", t).option("exactlyOnce", "true")
                 .option("transactionalIdPrefix", txn_prefix)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(once=True).start())
        try:
            assert query.awaitTermination(180), "the query did not finish its micro-batch"
            assert query.exception() is None, query.exception()
            # attributes: over Connect, p["numInputRows"] is None (only the sources
            # carry it in the progress JSON); p.numInputRows sums them
            return [p.batchId for p in query.recentProgress if p.numInputRows]
        finally:
            query.stop()

    assert run() == [0]
    assert run() == [1]
    total = 2 * ROWS_PER_BATCH
    read = read_committed(kafka_txn.bootstrap_servers, t, total)
    got = collections.Counter(int(r.value) for r in read)
    assert len(read) == total and max(got.values()) == 1, "rows missing or written twice"
    assert set(got) == set(range(total))
    for r in read:
        i = int(r.value)
        assert r.key == b"k%d" % (i % 97)
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 3
    readback.assert_no_open_transaction(kafka_txn.bootstrap_servers, t)
    for batch in (0, 1):  # the sink's own log in the checkpoint: both batches committed
        entry = json.loads((checkpoint / "pyprod" / ("%d.json" % batch)).read_text())
        assert entry["state"] == "committed" and entry["batch_id"] == batch, entry


def test_publish_over_connect(spark, kafka, topic):
    """pyprod.spark.publish takes the mapInArrow path (a Connect DataFrame has no RDD API);
    the tasks' counts come back through collect()."""
    t = topic(4)
    n = 25_000
    assert pyprod.spark.publish(frame(spark, n), t, bootstrap_servers=kafka.bootstrap_servers,
                                linger_ms=5) == n
    check_rows(readback.read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=n,
                                              timeout=120), n, 4)


def test_errors_reach_the_client(spark, kafka, topic):
    """Bad columns, modes and options fail the write at planning, with the sink's message."""
    t = topic(1)
    no_value = spark.range(3).select(F.col("id").cast("string").alias("key"))
    with pytest.raises(Exception, match="'value' not found"):
        writer(no_value, kafka.bootstrap_servers, t).save()
    values = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception, match="use mode\\('append'\\)"):
        writer(values, kafka.bootstrap_servers, t).mode("overwrite").save()
    with pytest.raises(Exception, match="no.such.setting"):
        writer(values, kafka.bootstrap_servers, t, **{"kafka.no.such.setting": "1"}).save()
    with pytest.raises(ValueError, match="'value' not found"):
        pyprod.spark.publish(no_value, t, bootstrap_servers=kafka.bootstrap_servers)
    assert readback.read_all_kafka_python(kafka.bootstrap_servers, t, timeout=30) == []
