"""Every Spark ```python block of README.md and docs/ runs (tests/test_doc_examples.py runs the
others) on the suite's Spark session and broker: `df` is a small batch DataFrame, `stream_df` a
streaming one; a streaming query a block starts must complete a micro-batch, then stops."""
import time

import pytest

from tests.harness import doc_examples
from tests.harness.security import USERS

SPARK = doc_examples.blocks("spark")


def _wait_for_a_batch(query, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"the streaming query failed: {query.exception()}")
        if any(p.get("numInputRows", 0) > 0 for p in query.recentProgress):
            return
        time.sleep(0.5)
    raise AssertionError("the streaming query wrote no micro-batch within %ss" % timeout)


@pytest.mark.parametrize("block", SPARK, ids=[b.id for b in SPARK])
def test_spark_doc_block_runs(block, spark, activate, kafka, request, tmp_path):
    from pyspark.sql import functions as F

    certs, bootstrap = None, kafka.bootstrap_servers
    if block.secure:
        secured = request.getfixturevalue("kafka_secure")
        certs = secured.certs
        bootstrap = secured.listener(doc_examples.secure_listener(block.code))
    code = doc_examples.prepare(block, bootstrap, certs, str(tmp_path))
    code = code.replace('password="..."', f'password="{USERS["alice"]}"')
    namespace = doc_examples.namespace({
        "spark": spark,
        "df": spark.range(1000).select(F.col("id").cast("string").alias("value")),
        "stream_df": spark.readStream.format("rate").option("rowsPerSecond", 50).load()
        .select(F.col("value").cast("string").alias("value")),
    })
    activate(spark)
    try:
        doc_examples.run(code, block.id, namespace)
        for query in spark.streams.active:
            _wait_for_a_batch(query)
    finally:
        for query in spark.streams.active:
            query.stop()
