"""send_batch's input checks, the same in both implementations (see kcore/___init__.py):
values, keys, headers, partitions and timestamps as Python sequences, pyarrow arrays or numpy
arrays and pandas Series (kcore.numpy_columns and its twin), checked and turned into per-record lists
(the compiled twin reads Arrow and fixed-width numpy buffers itself and uses these for the
rest). Compiled into kcore.batch_columns (the column readers), which kcore.batch_send
imports check_columns and prepare_rows from; the pure twin kcore/pure/batch_columns.py imports
it."""
import sys

if "_NpColumn" not in globals():  # the pure twin (batch_columns.pyx imports kcore.numpy_columns')
    from kcore.pure.numpy_columns import _np_binary_rows, _np_column, _np_int_rows, _NpColumn

_BYTES = (bytes, bytearray, memoryview)
_UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1000000)}  # -> ms
_INT32_MAX = (1 << 31) - 1
_MAX_TS = 1 << 62


def _arrow(obj):
    """pyarrow, if obj is a pyarrow Array or ChunkedArray (pyarrow is never imported here; a
    list is told apart by its type's module, so pyarrow half imported by another thread is
    never looked at for it)."""
    if not type(obj).__module__.startswith("pyarrow"):
        return None
    pa = sys.modules.get("pyarrow")
    types = (getattr(pa, "Array", None), getattr(pa, "ChunkedArray", None))
    if None not in types and isinstance(obj, types):
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


def _same_len(rows, name, n):
    """rows, read from a column of n entries (its len() when checked): a column that changed
    meanwhile (another thread, a serializer, a lying __len__) raises instead of sending."""
    if len(rows) != n:
        raise ValueError("%s changed during send_batch: %d entries read, %d expected"
                         % (name, len(rows), n))
    return rows


def _read_once(obj, serializer):
    """A list column without a serializer as one tuple: a list is copied at once (with the GIL,
    or under the list's lock without it), so another thread's change is in it wholly or not at
    all; what is read from then on no other thread can change. Other columns as given."""
    return tuple(obj) if serializer is None and type(obj) is list else obj


def _binary_rows(obj, name, serializer, topic, headers, n):
    """A list of n bytes|None: Arrow binary/string arrays as raw bytes, Python items
    serialized (a list column with a serializer read through its iterator, item by item as
    they are serialized: a compiled loop indexing the list could run past its end once another
    thread shortened it)."""
    if type(obj) is _NpColumn:  # S / U: raw bytes, as Arrow's
        return _np_binary_rows(obj, name)
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return _same_len(obj.to_pylist(), name, n)  # the reference: the compiled twin
        if pa.types.is_string(t) or pa.types.is_large_string(t):  # reads the buffers
            return _same_len([None if s is None else s.encode("utf-8")
                              for s in obj.to_pylist()], name, n)
        raise TypeError("%s: a pyarrow array of type %s is not supported (binary, large_binary, "
                        "string or large_string)" % (name, t))
    obj = _read_once(obj, serializer)
    out = []
    for i, item in enumerate(obj if type(obj) is tuple else iter(obj)):
        if i == n:
            raise ValueError("%s changed during send_batch: more than the %d entries expected"
                             % (name, n))
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
    return _same_len(out, name, n)


def _int_rows(obj, name, what, n):
    """n non-negative ints or None: partitions (<= int32 max) or timestamps in ms (an Arrow
    timestamp column of any unit is converted)."""
    limit, mul, div = (_MAX_TS if what == "timestamps" else _INT32_MAX), 1, 1
    if type(obj) is _NpColumn:
        return _np_int_rows(obj, name, limit)
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        if what == "timestamps" and pa.types.is_timestamp(t):
            mul, div = _UNITS[t.unit]
            obj = obj.cast(pa.int64())
        elif not pa.types.is_integer(t):
            raise TypeError("%s: a pyarrow array of type %s is not supported (an integer%s array)"
                            % (name, t, " or timestamp" if what == "timestamps" else ""))
        rows = obj.to_pylist()
    else:
        rows = _same_len(list(obj), name, n)
        for i, v in enumerate(rows):
            if v is not None and type(v) is not int:
                raise TypeError("%s[%d] must be an int or None, got %r" % (name, i, v))
    for i, v in enumerate(rows):
        if v is not None and not 0 <= v <= limit // mul:
            raise ValueError("%s[%d] is out of range: %d" % (name, i, v))
    return rows if mul == div else [None if v is None else v * mul // div for v in rows]


def _is_binary(pa, t):
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t))


def _arrow_headers_type(pa, t):
    """list<struct<key: string, value: binary>> (large and string variants allowed)."""
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    item = t.value_type
    if not pa.types.is_struct(item) or [f.name for f in item] != ["key", "value"]:
        return False
    key, value = item[0].type, item[1].type
    return (pa.types.is_string(key) or pa.types.is_large_string(key)) and _is_binary(pa, value)


def _header_rows(obj, n):
    pa = _arrow(obj)
    if pa is not None:
        t = obj.type
        if not _arrow_headers_type(pa, t):
            raise TypeError("headers: a pyarrow array of type %s is not supported "
                            "(list<struct<key: string, value: binary>>)" % (t,))
        rows = []
        for entry in obj.to_pylist():
            if entry is None:
                rows.append(None)
                continue
            pairs = []
            for h in entry:
                if h is None:
                    raise ValueError("headers: a header entry is null")
                if h["key"] is None:
                    raise ValueError("headers: a header key is null")
                v = h["value"]
                pairs.append((h["key"], v.encode("utf-8") if isinstance(v, str) else v))
            rows.append(pairs)
        return rows
    rows = _same_len(list(obj), "headers", n)
    for i, entry in enumerate(rows):
        if entry is None:
            continue
        if not isinstance(entry, (list, tuple)):
            raise TypeError("headers[%d] must be a list of (str, bytes) pairs or None" % i)
        for pair in iter(entry):  # an iterator: see _binary_rows
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
                    and (pair[1] is None or isinstance(pair[1], _BYTES))):
                raise TypeError("headers[%d]: expected (str, bytes|None) pairs, got %r"
                                % (i, pair))
    return rows


def check_columns(topic, values, keys, headers, partitions, timestamps):
    """The record count of a send_batch call, after its type and length checks, and its
    columns as read (numpy and pandas ones through _np_column)."""
    if type(topic) is not str or not topic:
        raise TypeError("topic must be a non-empty str, got %r" % (topic,))
    cols = [values, keys, headers, partitions, timestamps]
    n = 0
    for i, name in enumerate(("values", "keys", "headers", "partitions", "timestamps")):
        obj = cols[i]
        if obj is None:
            continue
        obj = cols[i] = _np_column(obj, name)
        if type(obj) is not _NpColumn and _arrow(obj) is None:
            _sequence(obj, name)
        if i == 0:
            n = len(obj)
        else:
            _check_len(obj, name, n)
    return n, cols


def prepare_rows(topic, values, keys, headers, partitions, timestamps, key_serializer=None,
                 value_serializer=None):
    """Checked per-record lists (values, keys, headers, partitions, timestamps) of one
    send_batch call; TypeError / ValueError on bad input, before anything is sent."""
    n, (values, keys, headers, partitions, timestamps) = check_columns(
        topic, values, keys, headers, partitions, timestamps)
    hdrs = [None] * n if headers is None else _header_rows(headers, n)
    given = hdrs if _arrow(headers) is None else [None] * n  # what serializers see
    out = [_binary_rows(values, "values", value_serializer, topic, given, n),
           [None] * n if keys is None else _binary_rows(keys, "keys", key_serializer, topic,
                                                        given, n),
           hdrs,
           [None] * n if partitions is None else _int_rows(partitions, "partitions",
                                                           "partitions", n),
           [None] * n if timestamps is None else _int_rows(timestamps, "timestamps",
                                                           "timestamps", n)]
    return out
