"""Kafka wire primitives: Writer and Reader (the declarative Struct codec is in schema.py).

Writer appends to a bytearray; large payloads (record batches) can be kept by reference
(``zero_copy_min``) so a frame is handed to ``socket.sendmsg`` without copying them at all.

Reader reads a bytes-like object with strict bounds checks: anything malformed (truncated,
negative or absurd length, bad UTF-8, overlong varint, null where not allowed) raises
``KafkaProtocolError`` saying what was read at which offset. No IndexError, struct.error or
UnicodeDecodeError escapes.

"compact" is the flexible-version encoding (unsigned varint length + 1, 0 meaning null).
"""
import struct
import uuid
from functools import partialmethod

from pyprod.errors import KafkaProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)
_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF


def _bad_value(what, value):
    if isinstance(value, int):
        return ValueError("%s out of range: %r" % (what, value))
    return TypeError("%s must be an int, got %s" % (what, type(value).__name__))


class Writer:
    """Append-only encoder. ``framed=True`` reserves the int32 size prefix, set by finish()."""

    __slots__ = ("_buf", "_chunks", "_done", "_framed", "_zero_copy_min")

    def __init__(self, framed=False, zero_copy_min=None):
        self._buf = bytearray(4) if framed else bytearray()
        self._chunks = []   # finished pieces before _buf: owned bytearrays or borrowed buffers
        self._done = 0      # bytes in _chunks
        self._framed = framed
        self._zero_copy_min = zero_copy_min

    def __len__(self):
        return self._done + len(self._buf)

    def _pack(self, st, value, what):
        try:
            self._buf += st.pack(value)
        except struct.error:
            raise _bad_value(what, value) from None

    def write_int8(self, v):
        self._pack(_I8, v, "int8")

    def write_int16(self, v):
        self._pack(_I16, v, "int16")

    def write_uint16(self, v):
        self._pack(_U16, v, "uint16")

    def write_int32(self, v):
        self._pack(_I32, v, "int32")

    def write_uint32(self, v):
        self._pack(_U32, v, "uint32")

    def write_int64(self, v):
        self._pack(_I64, v, "int64")

    def write_float64(self, v):
        try:
            self._buf += _F64.pack(v)
        except struct.error:
            raise TypeError("float64 must be a number, got %s" % type(v).__name__) from None

    def write_bool(self, v):
        self._buf.append(1 if v else 0)

    def write_uvarint(self, v, limit=_U32_MAX):
        """Unsigned varint (32-bit unless ``limit`` says otherwise)."""
        if not isinstance(v, int):
            raise _bad_value("unsigned varint", v)
        if not 0 <= v <= limit:
            raise ValueError("unsigned varint out of range: %r" % (v,))
        buf = self._buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def write_varint(self, v):
        """Zigzag signed 32-bit varint."""
        if not isinstance(v, int) or not -(1 << 31) <= v < (1 << 31):
            raise _bad_value("varint", v)
        self.write_uvarint(((v << 1) ^ (v >> 31)) & _U32_MAX)

    def write_varlong(self, v):
        """Zigzag signed 64-bit varint."""
        if not isinstance(v, int) or not -(1 << 63) <= v < (1 << 63):
            raise _bad_value("varlong", v)
        self.write_uvarint(((v << 1) ^ (v >> 63)) & _U64_MAX, _U64_MAX)

    def write_uuid(self, v):
        if v is None:
            v = ZERO_UUID
        if isinstance(v, uuid.UUID):
            self._buf += v.bytes
        elif isinstance(v, (bytes, bytearray)) and len(v) == 16:
            self._buf += v
        else:
            raise TypeError("uuid must be a uuid.UUID or 16 bytes, got %r" % (v,))

    def _write_len(self, n, compact, what):
        if compact:
            self.write_uvarint(n + 1)
        elif what == "string":
            if n > 0x7FFF:
                raise ValueError("string of %d bytes is too long (max 32767)" % n)
            self._buf += _I16.pack(n)
        else:
            if n > 0x7FFFFFFF:
                raise ValueError("%s of %d items is too long" % (what, n))
            self._buf += _I32.pack(n)

    def _write_null(self, compact, nullable, what):
        if not nullable:
            raise TypeError("%s must not be None" % what)
        if compact:
            self._buf.append(0)
        elif what == "string":
            self._buf += b"\xff\xff"
        else:
            self._buf += b"\xff\xff\xff\xff"

    def write_string(self, s, compact=False, nullable=False):
        if s is None:
            return self._write_null(compact, nullable, "string")
        if not isinstance(s, str):
            raise TypeError("string field must be str, got %s" % type(s).__name__)
        data = s.encode("utf-8")
        self._write_len(len(data), compact, "string")
        self._buf += data

    def write_bytes(self, b, compact=False, nullable=False):
        if b is None:
            return self._write_null(compact, nullable, "bytes")
        n = memoryview(b).nbytes
        self._write_len(n, compact, "bytes")
        self._buf += b

    def write_records(self, data, compact=False):
        """A nullable length-prefixed record set, appended with write_payload()."""
        if data is None:
            return self._write_null(compact, True, "bytes")
        self._write_len(memoryview(data).nbytes, compact, "bytes")
        self.write_payload(data)

    def write_array_len(self, n, compact=False, nullable=False):
        """Array header; ``n=None`` writes a null array."""
        if n is None:
            return self._write_null(compact, nullable, "array")
        self._write_len(n, compact, "array")

    write_nullable_string = partialmethod(write_string, nullable=True)
    write_compact_string = partialmethod(write_string, compact=True)
    write_compact_nullable_string = partialmethod(write_string, compact=True, nullable=True)
    write_nullable_bytes = partialmethod(write_bytes, nullable=True)
    write_compact_bytes = partialmethod(write_bytes, compact=True)
    write_compact_nullable_bytes = partialmethod(write_bytes, compact=True, nullable=True)
    write_compact_array_len = partialmethod(write_array_len, compact=True)

    def write_tagged_fields(self, fields=None):
        """Tagged-field section; ``fields`` maps tag -> already encoded bytes."""
        if not fields:
            self._buf.append(0)
            return
        self.write_uvarint(len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            self.write_uvarint(tag)
            self.write_uvarint(len(data))
            self._buf += data

    def write_raw(self, data):
        """Append bytes as they are (copied into the buffer)."""
        self._buf += data

    def write_payload(self, data):
        """Append a large buffer; kept by reference when zero_copy_min allows.

        A buffer kept by reference must not change until the frame is sent.
        """
        n = memoryview(data).nbytes
        if self._zero_copy_min is not None and n >= self._zero_copy_min:
            self._chunks.append(self._buf)
            self._chunks.append(data)
            self._done += len(self._buf) + n
            self._buf = bytearray()
        else:
            self._buf += data

    def finish(self):
        """Set the frame size prefix (framed writers); returns self."""
        if self._framed:
            size = len(self) - 4
            if size > 0x7FFFFFFF:
                raise ValueError("frame of %d bytes is too large" % size)
            first = self._chunks[0] if self._chunks else self._buf
            _I32.pack_into(first, 0, size)
        return self

    def getvalue(self):
        """Everything written, as bytes."""
        if not self._chunks:
            return bytes(self._buf)
        return b"".join(self._chunks + [self._buf])

    def getbuffer(self):
        """Everything written as one bytearray (no copy unless buffers were kept by reference)."""
        if not self._chunks:
            return self._buf
        return bytearray().join(self._chunks + [self._buf])

    def buffers(self):
        """The pieces in order, for ``socket.sendmsg`` (empty pieces left out)."""
        return [c for c in self._chunks + [self._buf] if len(c)]


class Reader:
    """Bounds-checked decoder over bytes, bytearray or memoryview."""

    __slots__ = ("_mv", "_pos", "_end")

    def __init__(self, data, pos=0, end=None):
        try:
            mv = memoryview(data)
        except TypeError:
            raise TypeError("Reader needs a bytes-like object, got %s"
                            % type(data).__name__) from None
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        size = mv.nbytes
        end = size if end is None else end
        if not 0 <= pos <= end <= size:
            raise ValueError("bad Reader window %d..%d of %d bytes" % (pos, end, size))
        self._mv = mv
        self._pos = pos
        self._end = end

    @property
    def pos(self):
        return self._pos

    @property
    def remaining(self):
        return self._end - self._pos

    def at_end(self):
        return self._pos >= self._end

    def expect_end(self, what="message"):
        if self._pos != self._end:
            raise KafkaProtocolError("%d unexpected trailing bytes after %s at offset %d"
                                     % (self._end - self._pos, what, self._pos))

    def _take(self, n, what):
        pos = self._pos
        if n > self._end - pos:
            raise KafkaProtocolError("truncated %s: need %d bytes at offset %d, %d left"
                                     % (what, n, pos, self._end - pos))
        self._pos = pos + n
        return pos

    def read_int8(self):
        return _I8.unpack_from(self._mv, self._take(1, "int8"))[0]

    def read_int16(self):
        return _I16.unpack_from(self._mv, self._take(2, "int16"))[0]

    def read_uint16(self):
        return _U16.unpack_from(self._mv, self._take(2, "uint16"))[0]

    def read_int32(self):
        return _I32.unpack_from(self._mv, self._take(4, "int32"))[0]

    def read_uint32(self):
        return _U32.unpack_from(self._mv, self._take(4, "uint32"))[0]

    def read_int64(self):
        return _I64.unpack_from(self._mv, self._take(8, "int64"))[0]

    def read_float64(self):
        return _F64.unpack_from(self._mv, self._take(8, "float64"))[0]

    def read_bool(self):
        return self._mv[self._take(1, "bool")] != 0

    def read_uvarint(self, what="unsigned varint", bits=32):
        mv, pos, end = self._mv, self._pos, self._end
        if pos < end and mv[pos] < 0x80:  # one byte: the usual case
            self._pos = pos + 1
            return mv[pos]
        result = shift = 0
        while shift < bits:
            if pos >= end:
                raise KafkaProtocolError("truncated %s at offset %d" % (what, self._pos))
            b = mv[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> bits:
                    break
                self._pos = pos
                return result
            shift += 7
        raise KafkaProtocolError("malformed %s at offset %d (more than %d bits)"
                                 % (what, self._pos, bits))

    def read_varint(self):
        v = self.read_uvarint("varint")
        return (v >> 1) ^ -(v & 1)

    def read_varlong(self):
        v = self.read_uvarint("varlong", 64)
        return (v >> 1) ^ -(v & 1)

    def read_uuid(self):
        pos = self._take(16, "uuid")
        return uuid.UUID(bytes=bytes(self._mv[pos:pos + 16]))

    def _read_len(self, compact, nullable, what):
        """Length of a string/bytes/array, or None for null."""
        if compact:
            n = self.read_uvarint(what + " length") - 1
        elif what == "string":
            n = self.read_int16()
        else:
            n = self.read_int32()
        if n < 0:
            if n == -1:
                if nullable:
                    return None
                raise KafkaProtocolError("null %s where none is allowed, at offset %d"
                                         % (what, self._pos))
            raise KafkaProtocolError("negative %s length %d at offset %d" % (what, n, self._pos))
        return n

    def read_string(self, compact=False, nullable=False):
        n = self._read_len(compact, nullable, "string")
        if n is None:
            return None
        pos = self._take(n, "string")
        try:
            return str(self._mv[pos:pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise KafkaProtocolError("string at offset %d is not UTF-8: %s" % (pos, e)) from None

    def read_bytes(self, compact=False, nullable=False):
        n = self._read_len(compact, nullable, "bytes")
        if n is None:
            return None
        pos = self._take(n, "bytes")
        return bytes(self._mv[pos:pos + n])

    def read_array_len(self, compact=False, nullable=False, min_item_size=1):
        """Element count (None for a null array); refuses counts the remaining bytes can't hold."""
        n = self._read_len(compact, nullable, "array")
        if n is not None and n * min_item_size > self._end - self._pos:
            raise KafkaProtocolError("array of %d items cannot fit in the %d bytes left (offset %d)"
                                     % (n, self._end - self._pos, self._pos))
        return n

    def unpack(self, st):
        """Values of a struct.Struct read at the current position."""
        return st.unpack_from(self._mv, self._take(st.size, "fields"))

    def read_int32_array(self, n):
        pos = self._take(4 * n, "int32 array")
        return struct.unpack_from(">%di" % n, self._mv, pos)

    read_nullable_string = partialmethod(read_string, nullable=True)
    read_compact_string = partialmethod(read_string, compact=True)
    read_compact_nullable_string = partialmethod(read_string, compact=True, nullable=True)
    read_nullable_bytes = partialmethod(read_bytes, nullable=True)
    read_compact_bytes = partialmethod(read_bytes, compact=True)
    read_compact_nullable_bytes = partialmethod(read_bytes, compact=True, nullable=True)
    read_compact_array_len = partialmethod(read_array_len, compact=True)

    def fork(self):
        """An independent Reader at the same position (for trial parses)."""
        return Reader(self._mv, self._pos, self._end)

    def skip(self, n, what="bytes"):
        if n < 0:
            raise ValueError("cannot skip %d bytes" % n)
        self._take(n, what)

    def sub(self, n, what="field"):
        """A Reader over the next ``n`` bytes; this reader moves past them."""
        if n < 0:
            raise ValueError("negative sub-reader size %d" % n)
        pos = self._take(n, what)
        return Reader(self._mv, pos, pos + n)

    def read_tagged_fields(self, handlers=None):
        """Read a tagged-field section; unknown tags are skipped.

        ``handlers`` maps tag -> fn(reader over the field's bytes); returns {tag: fn result}.
        """
        pos = self._pos
        if pos < self._end and self._mv[pos] == 0:  # the usual case: no tagged fields
            self._pos = pos + 1
            return {}
        count = self.read_uvarint("tagged field count")
        if count * 2 > self._end - self._pos:
            raise KafkaProtocolError("%d tagged fields cannot fit in the %d bytes left (offset %d)"
                                     % (count, self._end - self._pos, self._pos))
        found = {}
        for _ in range(count):
            tag = self.read_uvarint("tag")
            size = self.read_uvarint("tagged field size")
            sub = self.sub(size, "tagged field %d" % tag)
            if handlers is not None and tag in handlers:
                found[tag] = handlers[tag](sub)
        return found


def as_reader(data):
    return data if isinstance(data, Reader) else Reader(data)
