"""Reader/Writer primitives and the Struct codec."""
import uuid

import pytest

from pyprod.errors import KafkaProtocolError
from pyprod.protocol.schema import Field, Struct, parse_versions
from pyprod.protocol.wire import Reader, Writer

INTS = [("int8", 8), ("int16", 16), ("int32", 32), ("int64", 64)]


def roundtrip(write, read, value):
    w = Writer()
    write(w, value)
    r = Reader(w.getvalue())
    out = read(r)
    r.expect_end()
    return out, w.getvalue()


@pytest.mark.parametrize("name,bits", INTS)
def test_signed_ints(name, bits):
    write, read = getattr(Writer, "write_" + name), getattr(Reader, "read_" + name)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for v in (lo, -1, 0, 1, hi):
        out, data = roundtrip(write, read, v)
        assert out == v and len(data) == bits // 8
        assert data == v.to_bytes(bits // 8, "big", signed=True)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError):
            write(Writer(), bad)
    with pytest.raises(TypeError):
        write(Writer(), 1.5)
    with pytest.raises(TypeError):
        write(Writer(), "1")


def test_unsigned_and_misc():
    assert roundtrip(Writer.write_uint32, Reader.read_uint32, 0xFFFFFFFF)[0] == 0xFFFFFFFF
    assert roundtrip(Writer.write_uint16, Reader.read_uint16, 65535)[0] == 65535
    with pytest.raises(ValueError):
        Writer().write_uint32(-1)
    assert roundtrip(Writer.write_float64, Reader.read_float64, 2.5)[0] == 2.5
    for b in (True, False):
        assert roundtrip(Writer.write_bool, Reader.read_bool, b) == (b, bytes([b]))
    assert Reader(b"\x07").read_bool() is True
    u = uuid.uuid4()
    assert roundtrip(Writer.write_uuid, Reader.read_uuid, u) == (u, u.bytes)
    assert roundtrip(Writer.write_uuid, Reader.read_uuid, None)[0] == uuid.UUID(int=0)
    with pytest.raises(TypeError):
        Writer().write_uuid("not-a-uuid")


UVARINTS = [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
            (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f")]


@pytest.mark.parametrize("value,data", UVARINTS)
def test_uvarint(value, data):
    assert roundtrip(Writer.write_uvarint, Reader.read_uvarint, value) == (value, data)


def test_varint_zigzag():
    for v, data in ((0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
                    (2 ** 31 - 1, b"\xfe\xff\xff\xff\x0f"), (-2 ** 31, b"\xff\xff\xff\xff\x0f")):
        assert roundtrip(Writer.write_varint, Reader.read_varint, v) == (v, data)
    for v in (0, -1, 2 ** 63 - 1, -2 ** 63, 12345678901234):
        assert roundtrip(Writer.write_varlong, Reader.read_varlong, v)[0] == v
    with pytest.raises(ValueError):
        Writer().write_varint(2 ** 31)
    with pytest.raises(ValueError):
        Writer().write_uvarint(-1)
    with pytest.raises(ValueError):
        Writer().write_uvarint(2 ** 32)
    with pytest.raises(TypeError):
        Writer().write_uvarint(1.0)


def test_varint_malformed():
    for data in (b"", b"\x80", b"\xff\xff\xff\xff"):
        with pytest.raises(KafkaProtocolError, match="truncated"):
            Reader(data).read_uvarint()
    # 6 bytes, or 5 bytes over 32 bits
    for data in (b"\xff\xff\xff\xff\xff\x01", b"\xff\xff\xff\xff\x10"):
        with pytest.raises(KafkaProtocolError, match="malformed"):
            Reader(data).read_uvarint()
    with pytest.raises(KafkaProtocolError):
        Reader(b"\xff" * 10 + b"\x01").read_varlong()


@pytest.mark.parametrize("compact", [False, True])
def test_strings(compact):
    for s in ("", "a", "tópic", "x" * 300):
        out, data = roundtrip(lambda w, v: w.write_string(v, compact),
                              lambda r: r.read_string(compact), s)
        assert out == s
    out, data = roundtrip(lambda w, v: w.write_string(v, compact, True),
                          lambda r: r.read_string(compact, True), None)
    assert out is None and data == (b"\x00" if compact else b"\xff\xff")
    with pytest.raises(TypeError):
        Writer().write_string(None, compact)
    with pytest.raises(TypeError):
        Writer().write_string(b"bytes", compact)
    with pytest.raises(KafkaProtocolError, match="null"):
        Reader(b"\x00" if compact else b"\xff\xff").read_string(compact)


def test_string_wire_format_and_aliases():
    w = Writer()
    w.write_string("ab")
    w.write_compact_string("ab")
    w.write_nullable_string(None)
    w.write_compact_nullable_string(None)
    assert w.getvalue() == b"\x00\x02ab\x03ab\xff\xff\x00"
    r = Reader(w.getvalue())
    assert [r.read_string(), r.read_compact_string(), r.read_nullable_string(),
            r.read_compact_nullable_string()] == ["ab", "ab", None, None]
    with pytest.raises(ValueError):
        Writer().write_string("x" * 40000)
    Writer().write_compact_string("x" * 40000)  # compact strings have no int16 limit


def test_string_errors():
    with pytest.raises(KafkaProtocolError, match="negative"):
        Reader(b"\xff\xfe").read_string(nullable=True)
    with pytest.raises(KafkaProtocolError, match="truncated"):
        Reader(b"\x00\x05abc").read_string()
    with pytest.raises(KafkaProtocolError, match="UTF-8"):
        Reader(b"\x00\x02\xff\xfe").read_string()
    with pytest.raises(KafkaProtocolError):
        Reader(b"\x05ab").read_compact_string()


@pytest.mark.parametrize("compact", [False, True])
def test_bytes(compact):
    for b in (b"", b"\x00\x01", bytes(range(256)) * 3):
        for given in (b, bytearray(b), memoryview(b)):
            out, _ = roundtrip(lambda w, v: w.write_bytes(v, compact),
                               lambda r: r.read_bytes(compact), given)
            assert out == b and type(out) is bytes
    out, data = roundtrip(lambda w, v: w.write_bytes(v, compact, True),
                          lambda r: r.read_bytes(compact, True), None)
    assert out is None and data == (b"\x00" if compact else b"\xff\xff\xff\xff")
    w = Writer()
    w.write_compact_bytes(b"xy")
    w.write_nullable_bytes(None)
    w.write_compact_nullable_bytes(None)
    w.write_bytes(b"z")
    assert w.getvalue() == b"\x03xy\xff\xff\xff\xff\x00\x00\x00\x00\x01z"
    with pytest.raises(KafkaProtocolError, match="truncated"):
        Reader(b"\x00\x00\x10\x00abc").read_bytes()
    with pytest.raises(KafkaProtocolError, match="negative"):
        Reader(b"\x80\x00\x00\x00").read_bytes(nullable=True)


def test_arrays():
    w = Writer()
    w.write_array_len(3)
    w.write_compact_array_len(3)
    w.write_array_len(None, nullable=True)
    w.write_array_len(None, compact=True, nullable=True)
    assert w.getvalue() == b"\x00\x00\x00\x03\x04\xff\xff\xff\xff\x00"
    with pytest.raises(TypeError):
        Writer().write_array_len(None)
    r = Reader(w.getvalue() + bytes(20))
    assert r.read_array_len() == 3
    assert r.read_compact_array_len() == 3
    assert r.read_array_len(nullable=True) is None
    assert r.read_array_len(True, True) is None
    # counts the rest of the buffer cannot hold
    with pytest.raises(KafkaProtocolError, match="cannot fit"):
        Reader(b"\x7f\xff\xff\xff" + bytes(100)).read_array_len()
    with pytest.raises(KafkaProtocolError, match="cannot fit"):
        Reader(b"\x00\x00\x00\x03" + bytes(11)).read_array_len(min_item_size=4)
    with pytest.raises(KafkaProtocolError, match="cannot fit"):
        Reader(b"\xff\xff\xff\xff\x0f").read_compact_array_len()
    with pytest.raises(KafkaProtocolError, match="negative"):
        Reader(b"\xff\xff\xff\x00").read_array_len(nullable=True)
    with pytest.raises(KafkaProtocolError, match="null"):
        Reader(b"\xff\xff\xff\xff").read_array_len()
    assert Reader(b"\x00\x00\x00\x01\xff\xff\xff\xfe").read_int32_array(2) == (1, -2)


def test_tagged_fields():
    w = Writer()
    w.write_tagged_fields()
    w.write_tagged_fields({5: b"abc", 1: b"\x00\x07"})
    data = w.getvalue()
    assert data == b"\x00" + b"\x02" + b"\x01\x02\x00\x07" + b"\x05\x03abc"
    r = Reader(data)
    assert r.read_tagged_fields() == {}
    found = r.read_tagged_fields({1: Reader.read_int16})
    assert found == {1: 7}
    r.expect_end()
    for bad in (b"\x01", b"\x01\x00", b"\x01\x00\x05ab", b"\x05\x00\x00"):
        with pytest.raises(KafkaProtocolError):
            Reader(bad).read_tagged_fields()
    # a handler reading past its field's own bytes fails cleanly
    with pytest.raises(KafkaProtocolError, match="truncated"):
        Reader(b"\x01\x00\x01\x00\x00\x00\x00\x00").read_tagged_fields({0: Reader.read_int32})


def test_reader_window_and_helpers():
    data = bytearray(b"\x00\x01\x00\x02\x00\x03")
    r = Reader(memoryview(data), 2, 4)
    assert r.remaining == 2 and r.pos == 2
    f = r.fork()
    assert r.read_int16() == 2 and r.at_end()
    assert f.read_int16() == 2
    with pytest.raises(KafkaProtocolError):
        r.read_int8()
    with pytest.raises(ValueError):
        Reader(data, 5, 3)
    with pytest.raises(TypeError):
        Reader("text")
    with pytest.raises(TypeError):
        Reader(None)
    with pytest.raises(KafkaProtocolError, match="trailing"):
        Reader(b"\x00\x01").expect_end()
    r = Reader(b"abcdef")
    sub = r.sub(3)
    assert sub.remaining == 3 and r.remaining == 3
    r.skip(3)
    with pytest.raises(KafkaProtocolError):
        r.skip(1)
    import array
    assert Reader(array.array("i", [1])).remaining == 4  # non-byte buffers are cast


@pytest.mark.parametrize("read,size", [
    (Reader.read_int8, 1), (Reader.read_int16, 2), (Reader.read_int32, 4), (Reader.read_int64, 8),
    (Reader.read_uint32, 4), (Reader.read_uuid, 16), (Reader.read_float64, 8),
    (Reader.read_bool, 1), (Reader.read_string, 2), (Reader.read_bytes, 4),
    (Reader.read_compact_string, 1), (Reader.read_array_len, 4), (Reader.read_tagged_fields, 1)])
def test_every_read_on_short_input_raises_protocol_error(read, size):
    for n in range(size):
        with pytest.raises(KafkaProtocolError):
            read(Reader(bytes(20), 20 - n))  # n bytes left, fewer than needed


def test_writer_frame_and_zero_copy():
    big = bytes(range(256)) * 40
    w = Writer(framed=True, zero_copy_min=1000)
    w.write_int16(1)
    w.write_payload(big)
    w.write_payload(b"small")
    w.write_records(memoryview(big), compact=True)
    w.write_records(None)
    w.finish()
    bufs = w.buffers()
    assert bufs[1] is big and isinstance(bufs[3], memoryview)
    flat = w.getvalue()
    assert flat == b"".join(bytes(b) for b in bufs) == bytes(w.getbuffer())
    assert len(w) == len(flat)
    assert int.from_bytes(flat[:4], "big") == len(flat) - 4
    r = Reader(flat, 4)
    assert r.read_int16() == 1
    r.skip(len(big) + 5)
    assert r.read_compact_bytes() == big
    assert r.read_nullable_bytes() is None
    r.expect_end()
    # without zero copy: one bytearray, returned as is
    w = Writer(framed=True)
    w.write_payload(big)
    w.finish()
    assert w.buffers() == [w.getbuffer()] and w.getbuffer() is w.getbuffer()
    assert Writer().finish().getvalue() == b""


# ---- Struct codec ----

def test_parse_versions():
    assert parse_versions("3+")[0] == 3 and parse_versions("3+")[1] > 1000
    assert parse_versions("8-10") == (8, 10)
    assert parse_versions("5") == (5, 5)
    assert parse_versions("none") is None and parse_versions(None) is None


Inner = Struct("Inner", [Field("a", "int32"),
                         Field("s", "string", "1+", nullable="2+", default=None)])
Outer = Struct("Outer", [
    Field("x", "int16"),
    Field("items", "[]", fields=Inner),
    Field("ids", "[]int32", "1+", nullable="1+"),
    Field("names", "[]string", "2+"),
    Field("only_old", "int64", "0-1", default=-1),
    Field("tagged", "struct", "3+", tag=4, fields=Inner),
    Field("tagged_num", "int32", "3+", tag=1, default=-1),
])


@pytest.mark.parametrize("version,flexible", [(0, False), (1, False), (2, False), (3, True)])
def test_struct_round_trip_and_defaults(version, flexible):
    In = Inner.type
    value = {"x": 5, "items": [In(1, "p"), {"a": 2, "s": None if version >= 2 else "q"}],
             "ids": [3, 4], "names": ["n"], "only_old": 9, "tagged": In(7, "t"), "tagged_num": 3}
    w = Writer()
    Outer.encode(w, value, version, flexible)
    r = Reader(w.getvalue())
    out = Outer.decode(r, version, flexible)
    r.expect_end()
    assert out.x == 5 and out.items[0].a == 1 and out.items[1].a == 2
    assert out.items[0].s == ("p" if version >= 1 else None)  # absent in v0 -> default
    assert out.ids == ((3, 4) if version >= 1 else ())
    assert out.names == (("n",) if version >= 2 else ())
    assert out.only_old == (9 if version <= 1 else -1)
    assert out.tagged == (In(7, "t") if version >= 3 else None)
    assert out.tagged_num == (3 if version >= 3 else -1)
    assert type(out).__name__ == "Outer" and type(out.items[0]).__name__ == "Inner"


def test_struct_tagged_defaults_are_left_out():
    w = Writer()
    Outer.encode(w, {"x": 1}, 3, True)
    assert w.getvalue() == b"\x00\x01" + b"\x01" + b"\x01" + b"\x01" + b"\x00"
    out = Outer.decode(Reader(w.getvalue()), 3, True)
    assert out.tagged is None and out.tagged_num == -1 and out.ids == () and out.items == ()


def test_struct_plain_tuple_and_errors():
    w = Writer()
    Inner.encode(w, (3, "z"), 1, False)
    assert Inner.decode(Reader(w.getvalue()), 1, False) == (3, "z")
    with pytest.raises(TypeError):
        Inner.encode(Writer(), (3,), 1, False)
    with pytest.raises(ValueError):
        Field("bad", "int128")
    with pytest.raises(ValueError):
        Field("bad", "[]")
    with pytest.raises(TypeError):
        Outer.encode(Writer(), {"x": 1, "items": None}, 1, False)  # not a nullable array
