"""ProducerBatch's Python part, the same in both implementations (see kcore/shared/__init__.py):
the size bound of a record and the report of a completed batch's send_batch segments."""

# Java's AbstractRecords.estimateSizeInBytesUpperBound: header + worst-case varints per record.
BATCH_HEADER = 61
RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5

_TOLD = []  # a batch's segments once reported: no more may be added


def _report_segments(partition, segments, error, record_errors):
    for future, ordinal, rank, count in segments:
        errs = None
        if error is None and record_errors:
            errs = {rank + i - ordinal: e for i, e in record_errors.items()
                    if ordinal <= i < ordinal + count} or None
        future._range_done(partition, rank, count, error, errs)


def record_size_upper_bound(key, value, headers):
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0)
    size += len(value) if value is not None else 0
    for hkey, hvalue in headers or ():
        size += 10 + len(hkey.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0)
    return size
