"""ProduceRequest bodies and ProduceResponse results for the Sender (Java's ProduceRequest /
ProduceResponse), v3..v11.

encode_produce_body(version, acks, timeout_ms, transactional_id, batches) returns the request
body (no header, no size) as a list of bytes-like pieces; batches are (topic, partition,
payload) with topics grouped in first-seen order. The compiled twin leaves each payload in the
list as given (written with writev, never copied); this twin returns one bytes object.

decode_produce_response(version, body) returns (results, throttle_time_ms), one flat tuple per
partition: (topic, partition, error_code, base_offset, log_append_time_ms, log_start_offset,
error_message, record_errors), record_errors being a tuple of (batch_index, message). Tagged
fields (KIP-951's current_leader / node_endpoints) are skipped; bytes after the message are
ignored, as the Java client does. Anything malformed raises KafkaProtocolError.

This module writes and reads the wire format itself (a small writer and a bounds-checked
reader, as the compiled twin does), so kcore needs nothing of pyprod but its errors.
"""
import struct

from kcore.errors import KafkaProtocolError

__all__ = ["encode_produce_body", "decode_produce_response"]

MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM = 3, 12, 9  # v12: v11 on the wire (KIP-890)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms


def _check_version(version):
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError("Produce version %r is not supported (v%d..v%d)"
                         % (version, MIN_VERSION, MAX_VERSION))


# -- writing ----------------------------------------------------------------------------------

class _Writer:
    """A request body in one bytearray; ``compact`` is the flexible-version encoding."""

    __slots__ = ("buf", "compact")

    def __init__(self, compact):
        self.buf = bytearray()
        self.compact = compact

    def int(self, v, n):
        self.buf += int.to_bytes(v, n, "big", signed=True)

    def uvarint(self, v):
        buf = self.buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def length(self, n, width):
        """n >= -1 (-1: null): uvarint(n + 1) if compact, else a width-byte signed int."""
        if self.compact:
            self.uvarint(n + 1)
        else:
            self.int(n, width)

    def string(self, s):
        if s is None:
            return self.length(-1, 2)
        if not isinstance(s, str):
            raise TypeError("string field must be str, got %s" % type(s).__name__)
        data = s.encode("utf-8")
        if len(data) > 32767:
            raise ValueError("string of %d bytes is too long (max 32767)" % len(data))
        self.length(len(data), 2)
        self.buf += data

    def tags(self):
        if self.compact:  # an empty tagged-field section
            self.buf.append(0)


def encode_produce_body(version, acks, timeout_ms, transactional_id, batches):
    _check_version(version)
    if acks not in (-1, 0, 1):
        raise ValueError("acks must be -1 (all), 0 or 1, got %r" % (acks,))
    topics = {}
    for topic, partition, payload in batches:
        topics.setdefault(topic, []).append((partition, payload))
    w = _Writer(version >= FLEXIBLE_FROM)
    w.string(transactional_id)
    w.int(acks, 2)
    w.int(timeout_ms, 4)
    w.length(len(topics), 4)
    for topic, parts in topics.items():
        w.string(topic)
        w.length(len(parts), 4)
        for partition, payload in parts:
            w.int(partition, 4)
            if payload is None:
                w.length(-1, 4)
            else:
                with memoryview(payload) as view:
                    w.length(view.nbytes, 4)
                w.buf += payload
            w.tags()
        w.tags()
    w.tags()
    return [bytes(w.buf)]


# -- reading ----------------------------------------------------------------------------------

class _Reader:
    """Bounds-checked big-endian reader over a byte view; every length is checked against the
    bytes left before anything is read or allocated."""

    __slots__ = ("mv", "pos", "end", "compact")

    def __init__(self, mv, compact):
        self.mv, self.pos, self.end, self.compact = mv, 0, mv.nbytes, compact

    def fail(self, problem, what):
        raise KafkaProtocolError("%s %s at offset %d of a ProduceResponse"
                                 % (problem, what, self.pos))

    def take(self, n, what):
        """The offset of the next n bytes, which the reader moves past."""
        pos = self.pos
        if n > self.end - pos:
            self.fail("truncated", what)
        self.pos = pos + n
        return pos

    def unpack(self, st, what):
        return st.unpack_from(self.mv, self.take(st.size, what))

    def uvarint(self, what):
        """An unsigned 32-bit varint (at most 5 bytes)."""
        mv, end = self.mv, self.end
        result = shift = 0
        while shift < 32:
            if self.pos >= end:
                self.fail("truncated", what)
            b = mv[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> 32:
                    break
                return result
            shift += 7
        self.fail("malformed", what)

    def length(self, short, nullable, what):
        """A string/array length; -1 for null (if nullable)."""
        if self.compact:
            n = self.uvarint(what + " length") - 1
        else:
            n = self.unpack(_I16 if short else _I32, what + " length")[0]
        if n < 0:
            if n == -1 and nullable:
                return -1
            raise KafkaProtocolError("%s %s length %d at offset %d of a ProduceResponse" % (
                "null" if n == -1 else "negative", what, n, self.pos))
        return n

    def array_len(self):
        n = self.length(False, False, "array")
        if n > self.end - self.pos:
            raise KafkaProtocolError("array of %d items cannot fit in the %d bytes left "
                                     "(offset %d)" % (n, self.end - self.pos, self.pos))
        return n

    def string(self, nullable):
        n = self.length(True, nullable, "string")
        if n < 0:
            return None
        at = self.take(n, "string")
        try:
            return str(self.mv[at:at + n], "utf-8")
        except UnicodeDecodeError as e:
            raise KafkaProtocolError("string at offset %d is not UTF-8: %s" % (at, e)) from None

    def skip_tags(self):
        """Skip a tagged-field section (flexible versions only)."""
        if self.pos < self.end and self.mv[self.pos] == 0:  # the usual case: no tagged fields
            self.pos += 1
            return
        count = self.uvarint("tagged field count")
        if count * 2 > self.end - self.pos:
            self.fail("truncated", "tagged fields")
        for _ in range(count):
            self.uvarint("tag")
            self.take(self.uvarint("tagged field size"), "tagged field")


def _byte_view(body):
    try:
        mv = memoryview(body)
    except TypeError:
        raise TypeError("a ProduceResponse must be a bytes-like object, not %s"
                        % type(body).__name__) from None
    if mv.format == "B" and mv.ndim == 1:
        return mv
    with mv:
        return mv.cast("B")


def decode_produce_response(version, body):
    _check_version(version)
    with _byte_view(body) as mv:
        return _decode(_Reader(mv, version >= FLEXIBLE_FROM), version)


def _decode(r, version):
    flexible = r.compact
    results = []
    for _ in range(r.array_len()):
        topic = r.string(False)
        for _ in range(r.array_len()):
            partition, error_code, base_offset, append_time = r.unpack(_PARTITION, "partition")
            start_offset = r.unpack(_I64, "log_start_offset")[0] if version >= 5 else -1
            record_errors, message = (), None
            if version >= 8:
                record_errors = _record_errors(r)
                message = r.string(True)
            if flexible:
                r.skip_tags()
            results.append((topic, partition, error_code, base_offset, append_time,
                            start_offset, message, record_errors))
        if flexible:
            r.skip_tags()
    throttle = r.unpack(_I32, "throttle_time_ms")[0]
    if flexible:
        r.skip_tags()
    return results, throttle


def _record_errors(r):
    found = []
    for _ in range(r.array_len()):
        index = r.unpack(_I32, "batch_index")[0]
        found.append((index, r.string(True)))
        if r.compact:
            r.skip_tags()
    return tuple(found)
