"""pyprod.spark.publish(df, topic=None, **producer_config): the Spark 3 way (no Python Data
Source API). The same columns, producer cache and error rules as format("pyprod"), run through
mapInArrow (Spark >= 3.3), or foreachPartition where mapInArrow is missing."""
from __future__ import annotations

from pyprod.spark import options as sink_options
from pyprod.spark import writer as task_writer

_COUNT_SCHEMA = "records long"


def publish(df, topic=None, **producer_config):
    """Write ``df`` to Kafka; the number of records written. ``producer_config`` takes
    KafkaProducer's keyword arguments (``bootstrap_servers=...``, ``linger_ms=...``), and
    format("pyprod")'s dotted option names for what has no keyword (``**{"kafka.sasl.jaas.config":
    ..., "kafka.ssl.truststore.location": ...}``). Bad columns or configs raise before any task
    runs; a delivery error fails the job."""
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise ValueError("topic must be a non-empty str or None (then the 'topic' column)")
    settings = task_writer.settings_for(df.schema, topic,
                                        sink_options.python_configs(producer_config))
    if hasattr(df, "mapInArrow"):
        return publish_arrow(df, settings)
    return publish_rows(df, settings)


def publish_arrow(df, settings):
    """Each task writes its Arrow batches and returns its count; the counts are summed."""
    def run(batches):
        import pyarrow as pa
        n = task_writer.write_arrow(settings, batches)
        yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], names=["records"])

    return sum(row[0] for row in df.mapInArrow(run, _COUNT_SCHEMA).collect())


def publish_rows(df, settings):
    """foreachPartition with an accumulator for the count (a retried task counts twice)."""
    counter = df.sparkSession.sparkContext.accumulator(0)

    def run(rows):
        counter.add(task_writer.write_rows(settings, rows))

    df.foreachPartition(run)
    return counter.value
