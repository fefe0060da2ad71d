"""pyprod for PySpark.

    pyprod.spark.register(spark)                  # Spark >= 4.0: format("pyprod")
    df.write.format("pyprod").mode("append") \\
        .option("kafka.bootstrap.servers", "host:9092").option("topic", "events").save()

    pyprod.spark.publish(df, "events", bootstrap_servers="host:9092")   # Spark 3.x too

The modules: options (Spark options -> producer configs), columns (the sink's columns ->
send_batch arguments), producer_cache (one producer per config per worker), writer (one
task's write), transactions (exactly-once writes: option exactlyOnce), datasource (the Data
Source) and publish (the Spark 3 helper).
"""
from pyprod.spark.producer_cache import ProducerCache, default_cache
from pyprod.spark.publish import publish

__all__ = ["register", "publish", "ProducerCache", "default_cache", "FORMAT"]

FORMAT = "pyprod"


def register(spark):
    """Register format("pyprod") with ``spark`` (a SparkSession of Spark >= 4.0, classic or
    Spark Connect: the server's Python workers must import pyprod too)."""
    if not hasattr(spark, "dataSource"):
        raise RuntimeError("format('pyprod') needs Spark >= 4.0 (the Python Data Source API); "
                           "with Spark 3 use pyprod.spark.publish(df, topic, ...)")
    from pyprod.spark.datasource import PyprodDataSource
    spark.dataSource.register(PyprodDataSource)
    return PyprodDataSource
