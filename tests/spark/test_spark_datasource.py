"""format("pyprod") against the real broker, read back with confluent-kafka / kafka-python."""
import collections
import sys

import pytest
from kafka.partitioner.default import murmur2  # kafka-python's Java-compatible murmur2
from pyspark.sql import functions as F

from tests.harness import readback

N = 1_000_000
PARTITIONS = 6


def java_partition(key: bytes, n=PARTITIONS):
    return (murmur2(key) & 0x7FFFFFFF) % n


@pytest.fixture
def writer(activate):
    """writer(df, bootstrap, topic=None, linger_ms=5, ...) -> a DataFrameWriter for pyprod."""
    def make(df, bootstrap, topic=None, **kafka):
        activate(df.sparkSession)
        w = df.write.format("pyprod").mode("append").option("kafka.bootstrap.servers",
                                                            bootstrap)
        if topic is not None:
            w = w.option("topic", topic)
        for k, v in kafka.items():
            w = w.option("kafka." + k.replace("_", "."), v)
        return w
    return make


def test_million_rows_keys_values_headers_partitions(spark, kafka, topic, worker_logs,
                                                     writer):
    """1M rows through two tasks: every row once, with its key, value and headers; rows with
    a partition in it, rows without (null) in murmur2(key) % 6 as Java's partitioner puts
    them; per partition, each task's rows in order."""
    t = topic(PARTITIONS)
    df = spark.range(0, N, numPartitions=2).select(
        F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.when(F.col("id") % 2 == 1, (F.col("id") % PARTITIONS).cast("int")).alias("partition"),
        F.when(F.col("id") % 5 == 0, F.array(
            F.struct(F.lit("id").alias("key"), F.col("id").cast("string").cast("binary")
                     .alias("value")),
            F.struct(F.lit("empty").alias("key"), F.lit(b"").alias("value")))).alias("headers"))
    writer(df, kafka.bootstrap_servers, t, linger_ms=5).save()

    read = readback.read_all_confluent(kafka.bootstrap_servers, t, expected_count=N,
                                       timeout=300)
    assert len(read) == N
    seen = bytearray(N)
    last = {}  # (partition, task) -> last id
    for r in read:
        i = int(r.value[1:])
        assert not seen[i], "id %d read twice" % i
        seen[i] = 1
        assert r.key == b"k%d" % (i % 1000), (i, r.key)
        want = i % PARTITIONS if i % 2 else java_partition(r.key)
        assert r.partition == want, (i, r.key, r.partition, want)
        assert r.headers == ([("id", str(i).encode()), ("empty", b"")] if i % 5 == 0 else [])
        task = i * 2 // N
        assert last.get((r.partition, task), -1) < i, "partition %d out of order" % r.partition
        last[(r.partition, task)] = i
    assert all(seen)
    assert any("committed %d records from 2 tasks to %r" % (N, t) in m for m in worker_logs(t))


def test_per_row_topics_timestamps_and_string_values(spark, kafka, topic, writer):
    """A 'topic' column spreads rows over topics; timestamps (timestamp and long columns)
    arrive as given; one task, so the order is the DataFrame's."""
    t1, t2 = topic(3), topic(2)
    n = 3000
    df = spark.range(0, n, numPartitions=1).select(
        F.when(F.col("id") % 3 == 0, F.lit(t1)).otherwise(F.lit(t2)).alias("topic"),
        F.col("id").cast("string").alias("value"),
        F.when(F.col("id") % 7 != 0, F.col("id").cast("string").cast("binary")).alias("key"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("timestamp"))
    writer(df, kafka.bootstrap_servers).save()
    for t, ids in ((t1, [i for i in range(n) if i % 3 == 0]),
                   (t2, [i for i in range(n) if i % 3 != 0])):
        sent = [readback.Sent(None if i % 7 == 0 else str(i).encode(), str(i).encode(),
                              timestamp=1_700_000_000_000 + i) for i in ids]
        readback.compare(sent, readback.read_all_kafka_python(
            kafka.bootstrap_servers, t, expected_count=len(ids)))

    t3 = topic(1)
    df2 = spark.range(0, 100, numPartitions=1).select(
        F.col("id").cast("string").alias("value"),
        (F.lit(1_600_000_000_000) + F.col("id")).alias("timestamp"))  # a long: milliseconds
    writer(df2, kafka.bootstrap_servers, t3).save()
    read = readback.read_all_kafka_python(kafka.bootstrap_servers, t3, expected_count=100)
    assert [(r.value, r.timestamp) for r in read] == [
        (str(i).encode(), 1_600_000_000_000 + i) for i in range(100)]


def test_topic_option_overrides_the_column(spark, kafka, topic, writer):
    t, other = topic(1), topic(1)
    df = spark.range(10, numPartitions=1).select(
        F.lit(other).alias("topic"), F.col("id").cast("string").alias("value"))
    writer(df, kafka.bootstrap_servers, t).save()
    assert len(readback.read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=10)) == 10
    assert readback.read_all_kafka_python(kafka.bootstrap_servers, other) == []


def _fails(action, *needles):
    with pytest.raises(Exception) as info:
        action()
    text = str(info.value)
    for needle in needles:
        assert needle in text, text[-2000:]
    return text


@pytest.mark.parametrize("select, needle", [
    (["cast(id as string) as key"], "required column 'value' not found"),
    (["id as value"], "column 'value' must be of type string or binary, got bigint"),
    (["cast(id as string) as value", "id as key"], "column 'key' must be"),
])
def test_bad_columns_fail_the_job_before_any_task(spark, kafka, topic, worker_logs, select,
                                                  needle, writer):
    t = topic(1)
    df = spark.range(100).selectExpr(*select)
    _fails(lambda: writer(df, kafka.bootstrap_servers, t).save(), needle)
    assert readback.read_all_kafka_python(kafka.bootstrap_servers, t) == []
    assert worker_logs(t) == []  # no commit, no abort: no job ran


def test_missing_topic_column_and_null_topics(spark, kafka, topic, writer):
    df = spark.range(3).selectExpr("cast(id as string) as value")
    _fails(lambda: writer(df, kafka.bootstrap_servers).save(), "'topic' not found")
    df = spark.range(3).selectExpr("cast(id as string) as value", "cast(null as string) topic")
    _fails(lambda: writer(df, kafka.bootstrap_servers).save(), "null topic")


@pytest.mark.parametrize("opt, value, needle", [
    ("kafka.linger.ms", "soon", "option 'kafka.linger.ms': expected a number"),
    ("kafka.not.a.config", "1", "'kafka.not.a.config'"),
    ("failOnDataLoss", "false", "unsupported option 'failondataloss'"),
])
def test_bad_options_fail_clearly(spark, kafka, topic, opt, value, needle, writer):
    df = spark.range(3).selectExpr("cast(id as string) as value")
    _fails(lambda: writer(df, kafka.bootstrap_servers, topic(1)).option(opt, value).save(),
           needle)


def test_overwrite_is_refused(spark, kafka, topic, writer):
    df = spark.range(3).selectExpr("cast(id as string) as value")
    _fails(lambda: writer(df, kafka.bootstrap_servers, topic(1)).mode("overwrite").save(),
           "use mode('append')")


def test_a_delivery_error_fails_the_task_and_the_job(spark, kafka, topic, worker_logs, writer):
    """A record larger than max.request.size: the task fails with send_batch's
    BatchDeliveryError, the job aborts, and abort() logs it."""
    t = topic(1)
    df = spark.range(0, 20, numPartitions=2).select(
        F.when(F.col("id") == 15, F.expr("repeat('x', 200000)"))
        .otherwise(F.col("id").cast("string")).alias("value"))
    text = _fails(lambda: writer(df, kafka.bootstrap_servers, t,
                                 max_request_size="100000").save(),
                  "BatchDeliveryError", "MessageSizeTooLargeError")
    assert "1 of 10 records failed" in text
    # Spark hands abort() the messages of the tasks it saw finish (here possibly none)
    assert any(m.startswith("pyprod.spark: aborted; ") and "of 2 tasks reported success" in m
               for m in worker_logs(t))


def test_row_writer(spark, kafka, topic, activate):
    """The Row writer (Sparks without DataSourceArrowWriter) writes the same records."""
    from pyspark import cloudpickle
    from pyspark.sql.datasource import DataSource

    from pyprod.spark import datasource

    class RowsDataSource(datasource.PyprodDataSource):
        @classmethod
        def name(cls):
            return "pyprod_rows_test"

        def writer(self, schema, overwrite):
            return datasource.PyprodRowWriter(self._settings(schema, overwrite, False))

    assert issubclass(RowsDataSource, DataSource)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(RowsDataSource)
    t = topic(2)
    n = 25_000  # more than one chunk
    df = spark.range(0, n, numPartitions=1).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.col("id").cast("string").alias("value"),
        F.array(F.struct(F.lit("h").alias("key"), F.lit(b"1").alias("value"))).alias("headers"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("timestamp"))
    activate(spark)
    df.write.format("pyprod_rows_test").mode("append") \
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", t).save()
    sent = [readback.Sent(str(i).encode(), str(i).encode(), [("h", b"1")],
                          1_700_000_000_000 + i, java_partition(str(i).encode(), 2))
            for i in range(n)]
    readback.compare(sent, readback.read_all_confluent(kafka.bootstrap_servers, t,
                                                       expected_count=n))


def test_commit_message_counts(spark, kafka, topic, worker_logs, activate):
    t = topic(1)
    activate(spark)
    spark.range(0, 1234, numPartitions=3).selectExpr("cast(id as string) as value") \
        .write.format("pyprod").mode("append") \
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", t).save()
    assert worker_logs("committed 1234 records from 3 tasks to %r" % t)
    per_partition = collections.Counter(
        r.partition for r in readback.read_all_kafka_python(kafka.bootstrap_servers, t))
    assert per_partition == {0: 1234}


def test_commit_and_abort_report_totals(caplog):
    """commit()/abort() as Spark calls them (in a Python worker): totals logged and kept."""
    from pyprod.spark import datasource, writer as task_writer
    from pyspark.sql.types import StringType, StructField, StructType

    settings = task_writer.settings_for(StructType([StructField("value", StringType())]), "t",
                                        {"bootstrap_servers": "127.0.0.1:1"})
    w = datasource.PyprodWriter(settings)
    msgs = [datasource.PyprodCommitMessage(5), datasource.PyprodCommitMessage(7)]
    with caplog.at_level("INFO", logger="pyprod.spark.commit"):
        w.commit(msgs)
        assert w.last_commit == {"status": "committed", "records": 12, "tasks": 2,
                                 "succeeded_tasks": 2, "topic": "t", "batch_id": None}
        w.abort([msgs[0], None])
        assert w.last_commit["status"] == "aborted" and w.last_commit["records"] == 5
        s = datasource.PyprodStreamWriter(settings)
        s.commit(msgs, 4)
        assert s.last_commit["batch_id"] == 4
    text = caplog.text
    assert "committed 12 records from 2 tasks to 't'" in text
    assert "aborted; 1 of 2 tasks reported success (5 records" in text
    assert "(micro-batch 4)" in text
