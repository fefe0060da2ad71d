"""ProducerBatch's Python part, the same in both implementations (see kcore/___init__.py):
the size bound of a record and the report of a completed batch's send_batch segments."""
from kcore.compression_type import for_id

# Java's AbstractRecords.estimateSizeInBytesUpperBound: header + worst-case varints per record.
BATCH_HEADER = 61
RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5
GROWTH = 4  # an open batch that grows takes a buffer this many times its size (three steps
            # from 16 KiB to 960 KiB: its records are copied at most about a third of a time)

_TOLD = []  # a batch's segments once reported: no more may be added


def _report_segments(partition, segments, error, record_errors):
    for future, ordinal, rank, count in segments:
        errs = None
        if error is None and record_errors:
            errs = {rank + i - ordinal: e for i, e in record_errors.items()
                    if ordinal <= i < ordinal + count} or None
        future.range_done(partition, rank, count, error, errs)


def record_size_upper_bound(key, value, headers):
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0)
    size += len(value) if value is not None else 0
    for hkey, hvalue in headers or ():
        size += 10 + len(hkey.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0)
    return size


# -- splitting a batch the broker refused as too large (Java's ProducerBatch.split) ----------
def _uvarint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _varint(buf, pos):
    v, pos = _uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def _blob_at(buf, pos):
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def batch_records(payload):
    """[(timestamp_ms, key, value, headers)] of a built v2 batch (ours), in order."""
    buf = memoryview(payload)
    codec = int.from_bytes(buf[21:23], "big") & 7
    first_ts = int.from_bytes(buf[27:35], "big", signed=True)
    count = int.from_bytes(buf[57:61], "big", signed=True)
    body = buf[BATCH_HEADER:] if codec == 0 else memoryview(
        for_id(codec).decompress(buf[BATCH_HEADER:]))
    records, pos = [], 0
    for _ in range(count):
        _, pos = _varint(body, pos)      # record length
        pos += 1                         # attributes
        delta, pos = _varint(body, pos)  # timestamp delta
        _, pos = _varint(body, pos)      # offset delta
        key, pos = _blob_at(body, pos)
        value, pos = _blob_at(body, pos)
        n, pos = _varint(body, pos)
        headers = []
        for _ in range(n):
            hkey, pos = _blob_at(body, pos)
            hvalue, pos = _blob_at(body, pos)
            headers.append((hkey.decode("utf-8"), hvalue))
        records.append((first_ts + delta, key, value, headers))
    return records


def _split_in_halves(batch, batch_class, batch_size, compression):
    """Two new batches with the records of ``batch`` (built, 2+ records), first half first.
    They keep its creation time and, if it had one, its producer state and sequences; its
    result now reads each record's outcome from theirs (``pieces``)."""
    records = batch_records(batch.payload)
    half = len(records) // 2
    pieces, halves = [], []
    for first, part in ((0, records[:half]), (half, records[half:])):
        size = BATCH_HEADER + sum(record_size_upper_bound(k, v, h) for _, k, v, h in part)
        child = batch_class(batch.topic_partition, max(batch_size, size), compression,
                            batch.created_ms)
        for ts, key, value, headers in part:
            if child.try_append(ts, key, value, headers, -1,
                                record_size_upper_bound(key, value, headers)) is None:
                raise AssertionError("a split batch refused a record")  # sized to fit
        if batch.has_sequence:
            pid, epoch = batch.sequence_epoch
            child.build(pid, epoch, (batch.base_sequence + first) % (1 << 31),
                        bool(memoryview(batch.payload)[22] & 0x10))  # transactional
        else:
            child.build()
        child.last_attempt_ms = batch.last_attempt_ms
        pieces.append((first, len(part), child.result))
        halves.append(child)
    batch.result.pieces = pieces
    return halves


def piece_errors(pieces):
    """{record index: exception} of a split batch from its pieces' outcomes (all done)."""
    out = {}
    for first, count, piece in pieces:
        if piece.error is not None:
            for i in range(count):
                out[first + i] = piece.error
        elif piece.record_errors:
            for i, exc in piece.record_errors.items():
                out[first + i] = exc
    return out
