"""Sink options -> producer configs, and the column rules (no Spark session needed)."""
import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from pyprod.errors import KafkaConfigurationError
from pyprod.spark import columns, options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_java_names_map_and_values_are_typed():
    topic, cfg = options.parse(dict(BS, **{
        "topic": "events", "kafka.linger.ms": "5", "kafka.acks": "all",
        "kafka.enable.idempotence": "false", "kafka.compression.type": "lz4",
        "kafka.batch.size": "65536", "kafka.retries": "3", "kafka.client.id": "spark-x",
        "KAFKA.Buffer.Memory": "67108864"}))
    assert topic == "events"
    assert cfg == {"bootstrap_servers": "127.0.0.1:9092", "linger_ms": 5, "acks": "all",
                   "enable_idempotence": False, "compression_type": "lz4",
                   "batch_size": 65536, "retries": 3, "client_id": "spark-x",
                   "buffer_memory": 67108864}


@pytest.mark.parametrize("opts, needle", [
    ({"kafka.no.such.config": "1"}, "kafka.no.such.config"),
    ({"kafka.linger.ms": "soon"}, "kafka.linger.ms"),
    ({"kafka.enable.idempotence": "maybe"}, "kafka.enable.idempotence"),
    ({"kafka.key.serializer": "org.apache...ByteArraySerializer"}, "kafka.key.serializer"),
    ({"kafka.partitioner": "x"}, "kafka.partitioner"),
    ({"kafka.acks": "2"}, "acks"),
    ({"kafka.compression.type": "brotli"}, "brotli"),
    ({"includeHeaders": "true"}, "includeHeaders"),
    ({"path": "/tmp/x"}, "path"),
    ({"topic": ""}, "topic"),
])
def test_bad_options_are_named(opts, needle):
    with pytest.raises(KafkaConfigurationError, match=needle.replace(".", r"\.")):
        options.parse(dict(BS, **opts))


def test_bootstrap_servers_required():
    with pytest.raises(KafkaConfigurationError, match="kafka.bootstrap.servers"):
        options.parse({"topic": "t"})


def test_streaming_options_spark_adds_are_ignored():
    topic, cfg = options.parse(dict(BS, checkpointLocation="/tmp/c"), streaming=True)
    assert topic is None and cfg == {"bootstrap_servers": "127.0.0.1:9092"}
    with pytest.raises(KafkaConfigurationError, match="checkpointLocation"):
        options.parse(dict(BS, checkpointLocation="/tmp/c"))


HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))


def schema(**fields):
    return StructType([StructField(n, t) for n, t in fields.items()])


def test_resolve_all_columns_case_insensitively():
    s = schema(Value=BinaryType(), KEY=StringType(), topic=StringType(), partition=IntegerType(),
               headers=HEADERS, timestamp=TimestampType(), extra=LongType())
    c = columns.resolve(s)
    assert (c.value, c.key, c.topic, c.partition, c.headers, c.timestamp) == (0, 1, 2, 3, 4, 5)
    assert columns.resolve(s, "t").topic is None  # the option wins over the column
    assert columns.resolve(schema(value=StringType(), timestamp=LongType()), "t").timestamp == 1


@pytest.mark.parametrize("fields, topic, needle", [
    ({"key": StringType()}, "t", "'value' not found"),
    ({"value": IntegerType()}, "t", "'value' must be"),
    ({"value": StringType(), "key": LongType()}, "t", "'key' must be"),
    ({"value": StringType()}, None, "'topic' not found"),
    ({"value": StringType(), "topic": BinaryType()}, None, "'topic' must be"),
    ({"value": StringType(), "partition": StringType()}, "t", "'partition' must be"),
    ({"value": StringType(), "timestamp": StringType()}, "t", "'timestamp' must be"),
    ({"value": StringType(), "headers": ArrayType(StringType())}, "t", "'headers' must be"),
    ({"value": StringType(), "headers": ArrayType(StructType([
        StructField("k", StringType()), StructField("v", BinaryType())]))}, "t", "'headers'"),
])
def test_missing_or_ill_typed_columns_are_named(fields, topic, needle):
    with pytest.raises(ValueError, match=needle):
        columns.resolve(schema(**fields), topic)


def test_arrow_sends_split_by_topic_in_order():
    s = schema(value=StringType(), topic=StringType(), partition=IntegerType())
    c = columns.resolve(s)
    batch = pa.record_batch([pa.array(["a", "b", "c", "d"]), pa.array(["x", "y", "x", "x"]),
                             pa.array([0, None, 1, 2], pa.int32())],
                            names=["value", "topic", "partition"])
    got = {t: (n, kw["values"].to_pylist(), kw["partitions"].to_pylist())
           for t, n, kw in columns.arrow_sends(batch, c)}
    assert got == {"x": (3, ["a", "c", "d"], [0, 1, 2]), "y": (1, ["b"], [None])}
    [(t, n, kw)] = columns.arrow_sends(batch, c, "fixed")
    assert t == "fixed" and n == 4 and set(kw) == {"values", "partitions"}
    bad = pa.record_batch([pa.array(["a"]), pa.array([None], pa.string()),
                           pa.array([0], pa.int32())], names=["value", "topic", "partition"])
    with pytest.raises(ValueError, match="null topic"):
        list(columns.arrow_sends(bad, c))


def test_row_sends_convert_and_chunk():
    import datetime
    s = schema(value=StringType(), key=BinaryType(), topic=StringType(), headers=HEADERS,
               timestamp=TimestampType())
    c = columns.resolve(s)
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)
    rows = [("v%d" % i, bytearray(b"k"), "t%d" % (i % 2), [("h", bytearray(b"x"))], ts)
            for i in range(5)]
    out = list(columns.row_sends(iter(rows), c, chunk=3))
    assert [(t, n) for t, n, _ in out] == [("t0", 2), ("t1", 1), ("t1", 1), ("t0", 1)]
    t, n, kw = out[0]
    assert kw["values"] == [b"v0", b"v2"] and kw["keys"] == [b"k", b"k"]
    assert kw["headers"] == [[("h", b"x")]] * 2
    assert kw["timestamps"] == [int(ts.timestamp() * 1000)] * 2


def test_grouped_batches_become_tables_with_the_rows_in_order():
    from pyprod.spark.writer import grouped
    batches = [pa.record_batch([pa.array([str(i) for i in range(k, k + 3)])], names=["value"])
               for k in range(0, 30, 3)]
    batches.insert(2, pa.record_batch([pa.array([], pa.string())], names=["value"]))
    tables = list(grouped(iter(batches), rows=7))
    assert [t.num_rows for t in tables] == [9, 9, 9, 3]
    assert [v for t in tables for v in t.column(0).to_pylist()] == [str(i) for i in range(30)]
    assert [t.num_rows for t in grouped(iter(batches), nbytes=1)] == [3] * 10
    s = schema(value=StringType(), topic=StringType())
    table = pa.Table.from_batches([
        pa.record_batch([pa.array(["a", "b"]), pa.array(["x", "y"])], names=["value", "topic"]),
        pa.record_batch([pa.array(["c"]), pa.array(["x"])], names=["value", "topic"])])
    got = {t: kw["values"].to_pylist() for t, _, kw in columns.arrow_sends(table,
                                                                           columns.resolve(s))}
    assert got == {"x": ["a", "c"], "y": ["b"]}
