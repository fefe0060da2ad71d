"""BatchBuilder: aiokafka's create_batch() / send_batch() batch, filled by the caller.

It holds the serialized records until send_batch() hands them to the producer, all to one
partition, in order; it accepts records up to the producer's max_batch_size (the first one
always), then append() returns None and closes it, as aiokafka's does. append() returns
aiokafka's record metadata: the record's offset in the batch, its size bound and timestamp.
"""
from __future__ import annotations

import collections
import time
from typing import Any

import kcore

__all__ = ["BatchBuilder", "BatchRecordMetadata"]

# aiokafka's DefaultRecordMetadata: offset within the batch, crc (None in v2 batches), size
# and timestamp (ms) of one appended record.
BatchRecordMetadata = collections.namedtuple("BatchRecordMetadata",
                                             ["offset", "crc", "size", "timestamp"],
                                             module=__name__)


def _check_bytes(what, data):
    if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("Unsupported type for %s: %s (bytes or None expected; or configure "
                        "a %s_serializer)" % (what, type(data).__name__, what))


def serialize(key_serializer, value_serializer, key, value):
    """(key, value) through aiokafka's serializers (f(data), when given); they must come out
    bytes-like or None, as aiokafka takes them."""
    if key_serializer is not None:
        key = key_serializer(key)
    if value_serializer is not None:
        value = value_serializer(value)
    if key.__class__ is not bytes:  # (the usual case costs one test)
        _check_bytes("key", key)
    if value.__class__ is not bytes:
        _check_bytes("value", value)
    return key, value


class BatchBuilder:
    def __init__(self, batch_size: int, *, key_serializer: Any = None,
                 value_serializer: Any = None) -> None:
        self._batch_size = batch_size
        self._size = kcore.BATCH_HEADER
        self._records = []  # (timestamp ms, key, value, headers)
        self._closed = False
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer

    def append(self, *, timestamp: int | None, key: Any, value: Any,
               headers: list[tuple[str, bytes]] = []  # noqa: B006 (aiokafka's)
               ) -> BatchRecordMetadata | None:
        """Add a record (timestamp in ms, None: now); its metadata, or None if the batch is
        full (which closes it) or closed."""
        if self._closed:
            return None
        key, value = serialize(self._key_serializer, self._value_serializer, key, value)
        headers = list(headers or ())
        size = kcore.record_size_upper_bound(key, value, headers)
        if self._records and self._size + size > self._batch_size:
            self.close()
            return None
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        self._size += size
        self._records.append((timestamp, key, value, headers))
        return BatchRecordMetadata(len(self._records) - 1, None, size, timestamp)

    def close(self) -> None:
        """No more records (send_batch closes it too)."""
        self._closed = True

    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        """Its size in bytes (an upper bound until sent)."""
        return self._size

    def record_count(self) -> int:
        return len(self._records)


def take_records(batch):
    """Close ``batch`` and give its records, (timestamp ms, key, value, headers) each, in order
    (send_batch's; not a method: aiokafka's BatchBuilder has no such one)."""
    batch.close()
    return batch._records
