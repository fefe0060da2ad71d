"""send_batch input checks (step 1: rows as Python lists; the Arrow fast path comes next)."""
import sys

__all__ = ["prepare_rows"]

_BYTES = (bytes, bytearray, memoryview)
_UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1000000)}  # -> ms


def _arrow(obj):
    """pyarrow, if obj is a pyarrow Array or ChunkedArray (pyarrow is never imported here)."""
    pa = sys.modules.get("pyarrow")
    if pa is not None and isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return pa
    return None


def _sequence(obj, name):
    if isinstance(obj, (str, bytes, bytearray, memoryview, dict)) or not hasattr(obj, "__len__"):
        raise TypeError("%s must be a sequence or a pyarrow array, not %s"
                        % (name, type(obj).__name__))
    return obj


def _check_len(obj, name, n):
    if len(obj) != n:
        raise ValueError("%s has %d entries but values has %d" % (name, len(obj), n))


def _binary_rows(obj, name, serializer, topic, headers):
    """A list of bytes|None: Arrow binary/string arrays as raw bytes, Python items serialized."""
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return obj.to_pylist()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return [None if s is None else s.encode("utf-8") for s in obj.to_pylist()]
        raise TypeError("%s: a pyarrow array of type %s is not supported (binary, large_binary, "
                        "string or large_string)" % (name, t))
    out = []
    for i, item in enumerate(obj):
        if serializer is not None and item is not None:
            item = serializer(topic, headers[i], item)
        if item is None or type(item) is bytes:
            out.append(item)
        elif isinstance(item, _BYTES):
            out.append(bytes(item))
        elif isinstance(item, str) and serializer is None:
            out.append(item.encode("utf-8"))
        else:
            raise TypeError("%s[%d]: expected bytes, bytearray, memoryview, str or None, got %s"
                            % (name, i, type(item).__name__))
    return out


def _int_rows(obj, name, what):
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        if what == "timestamps" and pa.types.is_timestamp(t):
            mul, div = _UNITS[t.unit]
            return [None if v is None else v * mul // div
                    for v in obj.cast(pa.int64()).to_pylist()]
        if not pa.types.is_integer(t):
            raise TypeError("%s: a pyarrow array of type %s is not supported (an integer%s array)"
                            % (name, t, " or timestamp" if what == "timestamps" else ""))
        return obj.to_pylist()
    rows = list(obj)
    for i, v in enumerate(rows):
        if v is not None and (type(v) is not int or v < 0):
            raise (TypeError if type(v) is not int else ValueError)(
                "%s[%d] must be a non-negative int or None, got %r" % (name, i, v))
    return rows


def _header_rows(obj):
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        ok = (pa.types.is_list(t) or pa.types.is_large_list(t)) and \
            pa.types.is_struct(t.value_type) and \
            [f.name for f in t.value_type] == ["key", "value"]
        if not ok:
            raise TypeError("headers: a pyarrow array of type %s is not supported "
                            "(list<struct<key: string, value: binary>>)" % (t,))
        rows = []
        for entry in obj.to_pylist():
            rows.append(None if entry is None else
                        [(h["key"], h["value"]) for h in entry])
        return rows
    rows = list(obj)
    for i, entry in enumerate(rows):
        if entry is None:
            continue
        if not isinstance(entry, (list, tuple)):
            raise TypeError("headers[%d] must be a list of (str, bytes) pairs or None" % i)
        for pair in entry:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                    and (pair[1] is None or isinstance(pair[1], _BYTES))):
                raise TypeError("headers[%d]: expected (str, bytes|None) pairs, got %r"
                                % (i, pair))
    return rows


def prepare_rows(topic, values, keys, headers, partitions, timestamps, key_serializer=None,
                 value_serializer=None):
    """Checked per-record lists (values, keys, headers, partitions, timestamps) of one
    send_batch call; TypeError / ValueError on bad input, before anything is sent."""
    if type(topic) is not str or not topic:
        raise TypeError("topic must be a non-empty str, got %r" % (topic,))
    if _arrow(values) is None:
        _sequence(values, "values")
    n = len(values)
    for obj, name in ((keys, "keys"), (headers, "headers"), (partitions, "partitions"),
                      (timestamps, "timestamps")):
        if obj is not None:
            if _arrow(obj) is None:
                _sequence(obj, name)
            _check_len(obj, name, n)
    hdrs = [None] * n if headers is None else _header_rows(headers)
    out = [_binary_rows(values, "values", value_serializer, topic, hdrs),
           [None] * n if keys is None else _binary_rows(keys, "keys", key_serializer, topic,
                                                        hdrs),
           hdrs,
           [None] * n if partitions is None else _int_rows(partitions, "partitions",
                                                           "partitions"),
           [None] * n if timestamps is None else _int_rows(timestamps, "timestamps",
                                                           "timestamps")]
    for i, t in enumerate(out[4]):
        if t is not None and t < 0:
            raise ValueError("timestamps[%d] is negative: %d" % (i, t))
    for i, p in enumerate(out[3]):
        if p is not None and p < 0:
            raise ValueError("partitions[%d] is negative: %d" % (i, p))
    return out
