"""pyprod.spark.publish (the Spark 3 helper): mapInArrow, foreachPartition, same rules."""
import importlib

import pytest
from kafka.partitioner.default import murmur2
from pyspark.sql import functions as F

import pyprod.spark
from pyprod.errors import KafkaConfigurationError
from pyprod.spark import writer as task_writer
from tests.harness import readback

publish_mod = importlib.import_module("pyprod.spark.publish")  # the module, not the function


def _frame(spark, n, parts=1):
    return spark.range(0, n, numPartitions=parts).select(
        F.col("id").cast("string").cast("binary").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        F.array(F.struct(F.lit("i").alias("key"), F.col("id").cast("string").cast("binary")
                         .alias("value"))).alias("headers"),
        F.timestamp_millis(F.lit(1_650_000_000_000) + F.col("id")).alias("timestamp"))


def _expected(n, partitions):
    return [readback.Sent(str(i).encode(), b"v%d" % i, [("i", str(i).encode())],
                          1_650_000_000_000 + i,
                          (murmur2(str(i).encode()) & 0x7FFFFFFF) % partitions)
            for i in range(n)]


def test_publish_arrow_returns_the_count(spark, kafka, topic):
    t = topic(4)
    n = 30_000
    assert pyprod.spark.publish(_frame(spark, n), t, bootstrap_servers=kafka.bootstrap_servers,
                                linger_ms=5) == n
    readback.compare(_expected(n, 4), readback.read_all_kafka_python(
        kafka.bootstrap_servers, t, expected_count=n, timeout=60))


def test_publish_rows_fallback(spark, kafka, topic):
    """foreachPartition, as on a Spark without mapInArrow."""
    t = topic(2)
    n = 12_345
    settings = task_writer.settings_for(_frame(spark, n).schema, t,
                                        {"bootstrap_servers": kafka.bootstrap_servers})
    assert publish_mod.publish_rows(_frame(spark, n), settings) == n
    readback.compare(_expected(n, 2), readback.read_all_confluent(
        kafka.bootstrap_servers, t, expected_count=n))


def test_publish_topic_column_over_several_tasks(spark, kafka, topic):
    t1, t2 = topic(1), topic(1)
    df = spark.range(0, 1000, numPartitions=3).select(
        F.when(F.col("id") < 400, F.lit(t1)).otherwise(F.lit(t2)).alias("topic"),
        F.col("id").cast("string").alias("value"))
    assert pyprod.spark.publish(df, bootstrap_servers=kafka.bootstrap_servers) == 1000
    for t, ids in ((t1, range(400)), (t2, range(400, 1000))):
        read = readback.read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=len(ids))
        assert sorted(int(r.value) for r in read) == list(ids)


def test_publish_checks_before_running(spark):
    df = spark.range(3).selectExpr("cast(id as string) as key")
    with pytest.raises(ValueError, match="'value' not found"):
        pyprod.spark.publish(df, "t", bootstrap_servers="127.0.0.1:1")
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(ValueError, match="'topic' not found"):
        pyprod.spark.publish(df, bootstrap_servers="127.0.0.1:1")
    with pytest.raises(KafkaConfigurationError, match="bootstrap_servers"):
        pyprod.spark.publish(df, "t")
    with pytest.raises(KafkaConfigurationError, match="lingerms"):
        pyprod.spark.publish(df, "t", bootstrap_servers="127.0.0.1:1", lingerms=5)


def test_publish_delivery_error_fails_the_job(spark, kafka, topic):
    t = topic(1)
    df = spark.range(0, 10, numPartitions=1).select(
        F.when(F.col("id") == 3, F.expr("repeat('x', 50000)"))
        .otherwise(F.col("id").cast("string")).alias("value"))
    with pytest.raises(Exception, match="MessageSizeTooLargeError"):
        pyprod.spark.publish(df, t, bootstrap_servers=kafka.bootstrap_servers,
                             max_request_size=10000)


def test_register_needs_spark_4():
    class Spark3Session:
        pass
    with pytest.raises(RuntimeError, match="publish"):
        pyprod.spark.register(Spark3Session())
