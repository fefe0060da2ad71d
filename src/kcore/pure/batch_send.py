"""send_batch: many records in one call, with one future (pure twin of batch_send.pyx).

The call's records go straight into the accumulator's batches, without a future each. A batch
being filled is marked ``appending`` (drain() and other senders leave it); when the call lets go
of it, it notes a segment ``(future, ordinal, rank, count)`` on the batch: its records
``ordinal..`` are the call's ``rank..`` records of that partition. The batch reports each
segment to the call's BatchFuture when it completes, and a failed range becomes record indices
again only then, from the partition of each record that the call keeps (``_Placement``).

This twin reads pyarrow input through ``to_pylist`` (a reference for the compiled one, which
reads the Arrow buffers); Python sequences go through the producer's serializers.
"""
import collections
import sys
import time

from kcore.pure.future import BatchFuture
from kcore.pure.murmur import partition_for_key
from kcore.pure.producer_batch import BATCH_HEADER, record_size_upper_bound
from kcore.pure.record_accumulator import _not_in_metadata, _too_large
from pyprod.errors import IllegalStateError, KafkaError, KafkaTimeoutError

__all__ = ["BatchSendPath"]

_BYTES = (bytes, bytearray, memoryview)
_UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1000000)}  # -> ms
_INT32_MAX = (1 << 31) - 1
_MAX_TS = 1 << 62


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
            return obj.to_pylist()  # the reference: the compiled twin reads the buffers
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
    """Non-negative ints or None: partitions (<= int32 max) or timestamps in ms (an Arrow
    timestamp column of any unit is converted)."""
    limit, mul, div = (_MAX_TS if what == "timestamps" else _INT32_MAX), 1, 1
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
        rows = list(obj)
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


def _header_rows(obj):
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
    given = hdrs if _arrow(headers) is None else [None] * n  # what serializers see
    out = [_binary_rows(values, "values", value_serializer, topic, given),
           [None] * n if keys is None else _binary_rows(keys, "keys", key_serializer, topic,
                                                        given),
           hdrs,
           [None] * n if partitions is None else _int_rows(partitions, "partitions",
                                                           "partitions"),
           [None] * n if timestamps is None else _int_rows(timestamps, "timestamps",
                                                           "timestamps")]
    return out


class BatchSendPath:
    """KafkaProducer.send_batch (without a custom partitioner: the producer loops over send()
    for that). ``send_path`` is the producer's SendPath (closed and fork checks)."""

    def __init__(self, send_path, accumulator, config, wait_on_metadata, wakeup):
        self.send_path = send_path
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata
        self.wakeup = wakeup
        self.key_serializer = config["key_serializer"]
        self.value_serializer = config["value_serializer"]
        self.max_block_ms = config["max_block_ms"]
        self.max_request_size = config["max_request_size"]
        self.buffer_memory = config["buffer_memory"]

    def send(self, topic, values, keys=None, headers=None, partitions=None, timestamps=None):
        """Append every record; the call's BatchFuture."""
        self.send_path.check_usable()
        vals, keys, hdrs, parts, stamps = prepare_rows(
            topic, values, keys, headers, partitions, timestamps, self.key_serializer,
            self.value_serializer)
        n = len(vals)
        placed = _Placement(n)
        future = BatchFuture(topic, n, placed.locate)
        if n:
            info = self._topic(topic, max((p for p in parts if p is not None), default=None))
            future._add_pending(n)  # all of them now; what was not appended off at the end
            call = _Call(self, info, future, placed)
            call.run(vals, keys, hdrs, parts, stamps)
            future._add_pending(call.appended - n)
        future._seal()
        return future

    def _topic(self, topic, top):
        """The TopicInfo, waiting (max_block_ms) for metadata with partition `top`."""
        acc = self.accumulator
        info = acc.topic_info(topic)
        if info is None or (top is not None and top >= info.num_partitions):
            try:
                self.wait_on_metadata(topic, top, self.max_block_ms)
            except KafkaTimeoutError as e:
                raise KafkaTimeoutError("send_batch: %s; no records were appended" % (e,)) \
                    from e
            info = acc.topic_info(topic)
            if info is None or (top is not None and top >= info.num_partitions):
                raise _not_in_metadata(topic, top)
        return info


class _Placement:
    """The partition of each record of a call (-1: not appended, -2: refused): failed ranges
    of (partition, rank) back to record indices."""

    def __init__(self, n):
        self.parts = [-1] * n

    def locate(self, ranges):
        by_part = collections.defaultdict(list)
        for part, rank, count, error, record_errors in ranges:
            by_part[part].append((rank, count, error, record_errors))
        for lst in by_part.values():
            lst.sort(key=lambda r: r[0])
        seen = collections.Counter()
        at = collections.Counter()  # next range to look at, per partition
        out = []
        for index, part in enumerate(self.parts):
            lst = by_part.get(part)
            if lst is None:
                continue
            rank = seen[part]
            seen[part] = rank + 1
            j = at[part]
            while j < len(lst) and lst[j][0] + lst[j][1] <= rank:
                j += 1
            at[part] = j
            if j < len(lst) and lst[j][0] <= rank:
                start, count, error, record_errors = lst[j]
                exc = error if error is not None else (record_errors or {}).get(rank)
                if exc is not None:
                    out.append((index, exc))
        return out


class _Call:
    """One send_batch call's walk over its records."""

    def __init__(self, path, info, future, placed):
        self.path, self.info, self.future, self.placed = path, info, future, placed
        self.acc = path.accumulator
        self.cur = {}   # partition -> the batch held (appending) by this call
        self.seg = {}   # partition -> [ordinal, rank, count] of the held batch's segment
        self.rank = collections.Counter()  # partition -> records appended there before
        self.rolled = False  # the sticky partition's batch filled since it was chosen
        self.appended = 0

    def run(self, vals, keys, hdrs, parts, stamps):
        path, info, acc, future = self.path, self.info, self.acc, self.future
        limit = min(path.max_request_size, path.buffer_memory)
        nparts = info.num_partitions
        now = int(time.time() * 1000)
        try:
            for i in range(len(vals)):
                key, value, headers = keys[i], vals[i], hdrs[i]
                size = record_size_upper_bound(key, value, headers)
                if BATCH_HEADER + size > limit:
                    future._fail_now(i, _too_large(BATCH_HEADER + size, path.max_request_size,
                                                   path.buffer_memory))
                    self.placed.parts[i] = -2
                    continue
                part, sticky = parts[i], False
                if part is None:
                    if key is not None:
                        part = partition_for_key(key, nparts)
                    else:
                        part = acc.sticky_partition(info)
                        sticky = True
                ts = stamps[i] if stamps[i] is not None else now
                self._append(part, ts, key, value, headers, size)
                self.placed.parts[i] = part
                self.appended += 1
                if sticky and part == info.sticky:
                    info.produced += size
                    if info.produced >= acc.batch_size and self.rolled:
                        info.sticky = acc._next_partition(info)
                        info.produced = 0
                        self.rolled = False
        except KafkaTimeoutError as e:
            raise KafkaTimeoutError("send_batch: %s; %d of %d records were appended before "
                                    "and will still be delivered"
                                    % (e, self.appended, len(vals))) from e
        finally:
            for part in list(self.cur):
                self._release(part)
            path.wakeup()

    def _append(self, part, ts, key, value, headers, size):
        batch = self.cur.get(part)
        if batch is None:
            batch = self._take(part, size)
        while not batch.append_records(ts, key, value, headers, size):
            self._roll(part)
            batch = self._take(part, size)
        self.seg[part][2] += 1

    def _take(self, part, size):
        """Hold the partition's open last batch, or a new one."""
        acc, info = self.acc, self.info
        dq = info.deques[part]
        with acc._lock:
            batch = self._hold(part, dq)
            if batch is not None:
                return batch
        need = max(acc.batch_size, BATCH_HEADER + size)
        try:
            memory = acc.pool.allocate(need, 0)
        except KafkaTimeoutError:  # let go of the other batches, then wait for memory
            for other in list(self.cur):
                self._release(other)
            memory = acc.pool.allocate(need, self.path.max_block_ms)
        with acc._lock:
            if acc._closed:
                acc.pool.deallocate(memory)
                raise IllegalStateError("Producer closed while send in progress")
            batch = self._hold(part, dq)
            if batch is not None:  # another thread made one while this one waited
                acc.pool.deallocate(memory)
                return batch
            acc._new_batch(dq, info.tps[part], memory)
            batch = self._hold(part, dq)
        self.path.wakeup()
        return batch

    def _hold(self, part, dq):
        batch = dq[-1] if dq else None
        if batch is None or batch.closed or batch.appending:
            return None
        batch.appending = True
        self.cur[part] = batch
        self.seg[part] = [batch.record_count, self.rank[part], 0]
        return batch

    def _roll(self, part):
        self.cur[part].closed = True
        if part == self.info.sticky:
            self.rolled = True
        self._release(part)

    def _release(self, part):
        """Let go of the held batch, noting the call's records in it."""
        batch = self.cur.pop(part)
        ordinal, rank, count = self.seg.pop(part)
        if count:
            self.rank[part] += count
            if not batch.add_segment(self.future, ordinal, rank, count):  # aborted meanwhile
                self.future._range_done(part, rank, count, batch.result.error or KafkaError(
                    "the batch was aborted while records were appended"))
        batch.appending = False
