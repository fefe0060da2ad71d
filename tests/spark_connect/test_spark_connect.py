"""format("pyprod") through Spark Connect: a remote session (SparkSession.builder.remote) on the
Connect server pyspark ships, writing to the suite's real broker; read back by kafka-python.
register() goes over the wire (the server unpickles the Data Source, its Python workers import
pyprod from this checkout)."""
import collections
import os
import uuid

import pytest

import pyprod.spark
from tests.harness import readback
from tests.harness.readback import assert_no_open_transaction


def ids(bootstrap, topic, n, committed=False):
    records = readback.read_all_kafka_python(
        bootstrap, topic, expected_count=n, timeout=120,
        isolation_level="read_committed" if committed else "read_uncommitted")
    for r in records:
        assert r.key == b"k%d" % (int(r.value) % 7)
    return collections.Counter(int(r.value) for r in records)


def rows(spark, n, partitions=3):
    from pyspark.sql import functions as F
    return spark.range(0, n, 1, partitions).select(
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.col("id").cast("string").alias("value"))


@pytest.fixture(scope="module")
def remote(spark_connect):
    assert type(spark_connect).__module__.startswith("pyspark.sql.connect")
    pyprod.spark.register(spark_connect)
    return spark_connect


def writer(df, bootstrap, topic, exactly_once):
    w = df.write.format("pyprod").mode("append").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).option("kafka.linger.ms", "5")
    if exactly_once:
        w = w.option("exactlyOnce", "true") \
            .option("transactionalIdPrefix", "connect-" + uuid.uuid4().hex[:8])
    return w


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_batch_write_over_connect(remote, kafka, topic, exactly_once):
    t, n = topic(), 5_000
    writer(rows(remote, n), kafka.bootstrap_servers, t, exactly_once).save()
    assert ids(kafka.bootstrap_servers, t, n, committed=exactly_once) == \
        collections.Counter(range(n))
    assert_no_open_transaction(kafka.bootstrap_servers, t)


def test_a_bad_option_fails_the_remote_job_with_its_name(remote, kafka, topic):
    with pytest.raises(Exception, match="no.such.setting"):
        writer(rows(remote, 10), kafka.bootstrap_servers, topic(), False) \
            .option("kafka.no.such.setting", "1").save()


def test_exactly_once_streaming_over_connect(remote, kafka, topic, tmp_path):
    t, files, per = topic(), 3, 1_000
    src = tmp_path / "input"
    src.mkdir()
    for f in range(files):
        (src / ("part-%d.json" % f)).write_text(
            "".join('{"id": %d}\n' % i for i in range(f * per, (f + 1) * per)))
    from pyspark.sql import functions as F
    df = remote.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(src)) \
        .select(F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
                F.col("id").cast("string").alias("value"))
    query = df.writeStream.format("pyprod").option("kafka.bootstrap.servers",
                                                   kafka.bootstrap_servers) \
        .option("topic", t).option("exactlyOnce", "true") \
        .option("transactionalIdPrefix", "connect-" + uuid.uuid4().hex[:8]) \
        .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start()
    query.awaitTermination(300)
    assert not query.isActive and query.exception() is None
    assert ids(kafka.bootstrap_servers, t, files * per, committed=True) == \
        collections.Counter(range(files * per))
    assert_no_open_transaction(kafka.bootstrap_servers, t)
    assert sorted(os.listdir(tmp_path / "chk" / "pyprod")) == ["0.json", "1.json", "2.json"]


def test_publish_over_connect(remote, kafka, topic):
    t, n = topic(), 2_000
    assert pyprod.spark.publish(rows(remote, n), t, bootstrap_servers=kafka.bootstrap_servers,
                                linger_ms=5) == n
    assert ids(kafka.bootstrap_servers, t, n) == collections.Counter(range(n))
