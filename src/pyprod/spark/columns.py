"""The sink's columns, as Spark's built-in Kafka sink has them, and their conversion into
``KafkaProducer.send_batch`` arguments.

    value      string | binary                      required
    key        string | binary                      optional
    topic      string                               required unless the 'topic' option is set
                                                    (the option wins over the column)
    partition  int | long                           optional; null = the partitioner
    headers    array<struct<key:string,value:binary>>   optional
    timestamp  timestamp | long (ms)                optional; null = now

Other columns are ignored. Names match case-insensitively, as Spark resolves them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

CHUNK_ROWS = 10000  # rows per send_batch call on the row path

_BINARY = ("string", "binary")
_INTEGER = ("integer", "long")
_TIMESTAMP = ("timestamp", "long")


@dataclass(frozen=True)
class Columns:
    """Which schema field (index) feeds which part of a record."""
    value: int
    key: Optional[int] = None
    topic: Optional[int] = None
    partition: Optional[int] = None
    headers: Optional[int] = None
    timestamp: Optional[int] = None
    names: tuple = ()  # the schema's field names, for the messages


def _type_name(dtype):
    return dtype.typeName()


def _headers_ok(dtype):
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType
    if not isinstance(dtype, ArrayType) or not isinstance(dtype.elementType, StructType):
        return False
    fields = dtype.elementType.fields
    return (len(fields) == 2 and [f.name for f in fields] == ["key", "value"]
            and isinstance(fields[0].dataType, StringType)
            and isinstance(fields[1].dataType, BinaryType))


def resolve(schema, topic_option=None) -> Columns:
    """Columns for a Spark StructType; ValueError naming the column if one is missing or has
    the wrong type."""
    index = {}
    for i, field in enumerate(schema.fields):
        index.setdefault(field.name.lower(), i)

    def find(name, allowed, required=False, hint=""):
        i = index.get(name)
        if i is None:
            if required:
                raise ValueError("required column %r not found (columns: %s)%s"
                                 % (name, ", ".join(schema.names) or "none", hint))
            return None
        dtype = schema.fields[i].dataType
        if allowed == "headers":
            if not _headers_ok(dtype):
                raise ValueError("column %r must be array<struct<key:string,value:binary>>, "
                                 "got %s" % (schema.fields[i].name, dtype.simpleString()))
        elif _type_name(dtype) not in allowed:
            raise ValueError("column %r must be of type %s, got %s" % (
                schema.fields[i].name, " or ".join(allowed), dtype.simpleString()))
        return i

    value = find("value", _BINARY, required=True)
    topic = None
    if topic_option is None:
        topic = find("topic", ("string",), required=True,
                     hint="; set the 'topic' option or add a string column 'topic'")
    return Columns(value=value, key=find("key", _BINARY), topic=topic,
                   partition=find("partition", _INTEGER), headers=find("headers", "headers"),
                   timestamp=find("timestamp", _TIMESTAMP), names=tuple(schema.names))


def _null_topic():
    return ValueError("null topic in the data: fill the 'topic' column or set the 'topic' option")


# -- Arrow record batches (DataSourceArrowWriter, mapInArrow) -------------------------------
def arrow_sends(batch, cols: Columns, topic=None):
    """(topic, record count, send_batch keyword arguments) for each topic in ``batch`` (a
    RecordBatch or a Table)."""
    kwargs = {"values": batch.column(cols.value)}
    for name, i in (("keys", cols.key), ("partitions", cols.partition),
                    ("headers", cols.headers), ("timestamps", cols.timestamp)):
        if i is not None:
            kwargs[name] = batch.column(i)
    if topic is not None:
        yield topic, batch.num_rows, kwargs
        return
    import pyarrow.compute as pc
    topics = batch.column(cols.topic)
    if topics.null_count:
        raise _null_topic()
    names = pc.unique(topics)
    if len(names) == 1:
        yield names[0].as_py(), batch.num_rows, kwargs
        return
    for name in names:
        mask = pc.equal(topics, name)
        part = {k: v.filter(mask) for k, v in kwargs.items()}
        yield name.as_py(), len(part["values"]), part


# -- Spark Rows (DataSourceWriter on Spark without the Arrow writer, foreachPartition) -----
def _binary(v):
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


def _headers(v):
    if v is None:
        return None
    return [(h[0], _binary(h[1])) for h in v]


def _millis(v):
    if v is None or isinstance(v, int):
        return v
    # naive datetimes from Spark are in the session's local time zone, as timestamp() assumes
    return int(v.timestamp()) * 1000 + v.microsecond // 1000


def row_sends(rows, cols: Columns, topic=None, chunk=CHUNK_ROWS):
    """Like :func:`arrow_sends` for an iterator of Rows (tuples), ``chunk`` rows at a time."""
    convert = [("values", cols.value, _binary)]
    for name, i, fn in (("keys", cols.key, _binary), ("partitions", cols.partition, None),
                        ("headers", cols.headers, _headers),
                        ("timestamps", cols.timestamp, _millis)):
        if i is not None:
            convert.append((name, i, fn))
    buffered = []
    for row in rows:
        buffered.append(row)
        if len(buffered) >= chunk:
            yield from _rows_to_sends(buffered, convert, cols, topic)
            buffered = []
    if buffered:
        yield from _rows_to_sends(buffered, convert, cols, topic)


def _rows_to_sends(rows, convert, cols, topic):
    groups = {topic: rows} if topic is not None else {}
    if topic is None:
        for row in rows:
            name = row[cols.topic]
            if name is None:
                raise _null_topic()
            groups.setdefault(name, []).append(row)
    for name, group in groups.items():
        kwargs = {}
        for arg, i, fn in convert:
            kwargs[arg] = [r[i] for r in group] if fn is None else [fn(r[i]) for r in group]
        yield name, len(group), kwargs
