"""writeStream.format("pyprod"): micro-batches from the rate source, with a checkpoint."""
import collections
import time

from kafka.partitioner.default import murmur2
from pyspark.sql import functions as F

from pyprod.spark import datasource
from tests.harness import readback

ROWS_PER_BATCH = 5000
BATCHES = 3


def test_rate_stream_every_committed_row_exactly_once(spark, kafka, topic, tmp_path, activate):
    t = topic(3)
    activate(spark)
    rows = (spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", ROWS_PER_BATCH).option("numPartitions", 2).load())
    df = rows.select(F.col("value").cast("string").alias("value"),
                     F.concat(F.lit("k"), (F.col("value") % 97).cast("string")).alias("key"),
                     F.array(F.struct(F.lit("n").alias("key"),
                                      F.col("value").cast("string").cast("binary")
                                      .alias("value"))).alias("headers"))
    checkpoint = tmp_path / "checkpoint"
    query = (df.writeStream.format("pyprod").queryName("pyprod_rate")
             .option("kafka.bootstrap.servers", kafka.bootstrap_servers).option("topic", t)
             .option("kafka.linger.ms", "5").option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="500 milliseconds").start())
    try:
        for _ in range(1200):  # bounded wait for BATCHES finished micro-batches
            if query.exception() is not None or not query.isActive:
                break
            if len([p for p in query.recentProgress if p["numInputRows"]]) >= BATCHES:
                break
            time.sleep(0.1)
        assert query.exception() is None, query.exception()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        assert len(progress) >= BATCHES, progress
    finally:
        query.stop()
    committed = sum(p["numInputRows"] for p in progress)
    assert committed == ROWS_PER_BATCH * len(progress)
    read = readback.read_all_confluent(kafka.bootstrap_servers, t, expected_count=committed,
                                       timeout=120)
    ids = collections.Counter(int(r.value) for r in read)
    assert max(ids.values()) == 1, "rows written twice"
    missing = set(range(committed)) - set(ids)
    assert not missing, "%d committed rows missing, e.g. %s" % (len(missing), sorted(missing)[:5])
    for r in read:
        i = int(r.value)
        assert r.key == b"k%d" % (i % 97)
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 3
        assert r.headers == [("n", r.value)]
    # the checkpoint holds the committed batches (commit() logs each one too, but in the
    # stream's own session, whose worker logs this session cannot query)
    commits = {int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()}
    assert {p["batchId"] for p in progress} <= commits


def test_stream_writer_classes():
    """Arrow stream writer where Spark has one (4.1+), the Row writer otherwise."""
    from pyspark.sql import datasource as ds
    arrow = getattr(ds, "DataSourceStreamArrowWriter", None)
    base = arrow if arrow is not None else ds.DataSourceStreamWriter
    assert issubclass(datasource.PyprodStreamWriter, base)
    batch_base = getattr(ds, "DataSourceArrowWriter", ds.DataSourceWriter)
    assert issubclass(datasource.PyprodWriter, batch_base)
