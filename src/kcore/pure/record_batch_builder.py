"""Pure-Python twin of kcore.record_batch_builder: Kafka record batch v2 (magic 2) writer."""
import struct
import time
from operator import index

from kcore._compression_type import for_name
from kcore.pure.crc import crc32c
from kcore.pure.varint import encode_varint
from kcore.errors import IllegalStateError

__all__ = ["RecordBatchBuilder", "RECORD_BATCH_HEADER_SIZE"]

RECORD_BATCH_HEADER_SIZE = 61

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_AT, _ATTRS_AT = 17, 21
_TRANSACTIONAL = 0x10
_I16, _I32, _I64 = 1 << 15, 1 << 31, 1 << 63
_INT32_MAX = _I32 - 1
_NULL = encode_varint(-1)
_ENCODED = {}  # encode_varint results for the small values records are made of


def _varint(value):
    enc = _ENCODED.get(value)
    if enc is None:
        enc = encode_varint(value)
        if -1 <= value < 1 << 16:
            _ENCODED[value] = enc
    return enc


def _int_in(value, name, bits):
    value = index(value)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError("%s out of int%d range: %d" % (name, bits, value))
    return value


def _blob(obj, what):
    """bytes-like view of a key/value/header value, or None."""
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, str):
        raise TypeError("%s must be bytes, bytearray, memoryview or None, not str" % what)
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError("%s must be bytes, bytearray, memoryview or None, not %s"
                        % (what, type(obj).__name__)) from None
    if not view.c_contiguous:
        raise TypeError("%s buffer must be C-contiguous" % what)
    return view.cast("B") if view.ndim != 1 or view.format != "B" else view


def _encode_headers(headers):
    """(encoded header bytes, count) for a sequence of (str, bytes-like|None) pairs."""
    out = bytearray()
    count = 0
    for pair in headers:
        key, value = pair
        if not isinstance(key, str):
            raise TypeError("header key must be str, not %s" % type(key).__name__)
        kb = key.encode("utf-8")
        out += _varint(len(kb))
        out += kb
        value = _blob(value, "header value")
        if value is None:
            out += _NULL
        else:
            out += _varint(len(value))
            out += value
        count += 1
    return out, count


class RecordBatchBuilder:
    """Accumulates records into one v2 batch; build() returns the batch with baseOffset 0."""

    __slots__ = ("_buf", "_max_size", "_ctype", "_codec", "_attrs", "_producer_id",
                 "_producer_epoch", "_base_sequence", "_count", "_base_ts", "_max_ts", "_built", "_built_size")

    def __init__(self, max_size, compression="none", producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False):
        max_size = index(max_size)
        if max_size < 0:
            raise ValueError("max_size must be >= 0, got %d" % max_size)
        self._max_size = max_size
        self._ctype = for_name(compression)  # its kcore.compression_type.CompressionType
        self._codec = self._ctype.id         # attributes codec id, 0 = none
        self._attrs = self._codec | (_TRANSACTIONAL if transactional else 0)
        self._producer_id = _int_in(producer_id, "producer_id", 64)
        self._producer_epoch = _int_in(producer_epoch, "producer_epoch", 16)
        self._base_sequence = _int_in(base_sequence, "base_sequence", 32)
        self._buf = bytearray(RECORD_BATCH_HEADER_SIZE)
        self._count = 0
        self._base_ts = self._max_ts = -1
        self._built = False

    def __len__(self):
        return self._count

    def size_in_bytes(self):
        """Bytes written so far, the batch header included (the uncompressed size); after
        build(), what it had (another thread may ask while the Sender builds)."""
        buf = self._buf
        return len(buf) if buf is not None else self._built_size

    def raise_max_size(self, max_size):
        """Let later records fill up to max_size bytes (never lowers it)."""
        if max_size > self._max_size:
            self._max_size = max_size

    def append(self, timestamp_ms, key, value, headers=()):
        """Add one record; False (builder unchanged) if it does not fit in max_size."""
        if self._built:
            raise IllegalStateError("append() after build()")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        ts = _int_in(timestamp_ms, "timestamp_ms", 64)
        key = _blob(key, "key")
        value = _blob(value, "value")
        if headers is None or (type(headers) is tuple or type(headers) is list) and not headers:
            hdrs, hcount = b"", 0
        else:
            hdrs, hcount = _encode_headers(headers)
        if self._built:  # build() may have run from an iterator above
            raise IllegalStateError("append() after build()")
        count = self._count
        if count == _INT32_MAX:
            raise ValueError("record batch is full (2**31 - 1 records)")
        delta = 0
        if count:
            delta = (ts - self._base_ts + _I64) % (1 << 64) - _I64  # wraps like Java's long
        parts = [b"\x00", _varint(delta), _varint(count)]  # attributes, deltas
        for blob in (key, value):
            if blob is None:
                parts.append(_NULL)
            else:
                parts += (_varint(len(blob)), blob)
        parts += (_varint(hcount), hdrs)
        body = b"".join(parts)
        n = len(body)
        if n > _INT32_MAX:
            raise ValueError("record too large: %d bytes" % n)
        length = _varint(n)
        buf = self._buf
        end = len(buf) + len(length) + n
        if end - 12 > _INT32_MAX:
            raise ValueError("record batch would exceed 2**31 - 1 bytes")
        if count and end > self._max_size:
            return False
        buf += length
        buf += body
        if count == 0:
            self._base_ts = self._max_ts = ts
        elif ts > self._max_ts:
            self._max_ts = ts
        self._count = count + 1
        return True

    def build(self):
        """The complete batch as bytes (b"" when empty, as Java's MemoryRecords.EMPTY)."""
        if self._built:
            raise IllegalStateError("build() called twice")
        self._built = True
        self._built_size = len(self._buf)
        buf, self._buf = self._buf, None
        if not self._count:
            return b""
        if self._codec:
            records = self._ctype.compress(bytes(memoryview(buf)[RECORD_BATCH_HEADER_SIZE:]))
            buf = bytearray(RECORD_BATCH_HEADER_SIZE) + records
        _HEADER.pack_into(buf, 0, 0, len(buf) - 12, -1, 2, 0, self._attrs, self._count - 1,
                          self._base_ts, self._max_ts, self._producer_id, self._producer_epoch,
                          self._base_sequence, self._count)
        struct.pack_into(">I", buf, _CRC_AT, crc32c(memoryview(buf)[_ATTRS_AT:]))
        return bytes(buf)
