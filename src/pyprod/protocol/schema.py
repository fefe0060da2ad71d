"""Field and Struct describe a message as Kafka's JSON schemas do, and encode or decode it with
wire.py's Writer and Reader; Api bundles a request and a response Struct with the API key and
the versions pyprod supports."""
import struct
from collections import namedtuple

from .wire import Reader, Writer, ZERO_UUID, as_reader

# ---- declarative message structs -------------------------------------------------------------
#
# A message is a Struct of Fields, written like the Kafka JSON schemas:
#   Field("leader_epoch", "int32", "7+", default=-1)
#   Field("topics", "[]", "0+", nullable="1+", fields=[...])
# Version ranges are "N+", "N-M" or "none". Field types: int8 int16 uint16 int32 int64 float64
# bool string bytes records uuid, "[]int32" / "[]int64" / "[]string", "[]" (array of the struct
# given by ``fields``) and "struct" (one nested struct). Decoded values are namedtuples; arrays
# decode to tuples; a field absent in a version decodes to its default.

_INF = 1 << 30


def parse_versions(spec):
    """"3+" -> (3, inf), "8-10" -> (8, 10), "5" -> (5, 5), "none"/None -> None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), _INF
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


_SCALARS = {
    # type: (read, write, zero value, minimum encoded size)
    "int8": (Reader.read_int8, Writer.write_int8, 0, 1),
    "int16": (Reader.read_int16, Writer.write_int16, 0, 2),
    "uint16": (Reader.read_uint16, Writer.write_uint16, 0, 2),
    "int32": (Reader.read_int32, Writer.write_int32, 0, 4),
    "int64": (Reader.read_int64, Writer.write_int64, 0, 8),
    "float64": (Reader.read_float64, Writer.write_float64, 0.0, 8),
    "bool": (Reader.read_bool, Writer.write_bool, False, 1),
    "uuid": (Reader.read_uuid, Writer.write_uuid, ZERO_UUID, 16),
}
_MISSING = object()


class Field:
    __slots__ = ("name", "type", "versions", "nullable", "default", "tag", "struct", "elem")

    def __init__(self, name, type, versions="0+", nullable=None, default=_MISSING, tag=None,
                 fields=None):
        self.name = name
        self.type = type
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.tag = tag  # tagged field (flexible versions only) when not None
        if fields is not None and not isinstance(fields, Struct):
            fields = Struct(name, fields)
        self.struct = fields
        self.elem = type[2:] if type.startswith("[]") and type != "[]" else None
        if type not in _SCALARS and type not in ("string", "bytes", "records", "struct", "[]") \
                and self.elem not in _SCALARS and self.elem != "string":
            raise ValueError("unknown field type %r" % type)
        if (type in ("[]", "struct")) != (fields is not None):
            raise ValueError("field %s: 'fields' goes with types '[]' and 'struct'" % name)
        if default is _MISSING:
            default = _SCALARS[type][2] if type in _SCALARS else (
                () if type.startswith("[]") else "" if type == "string" else None)
        self.default = default

    def present(self, version):
        v = self.versions
        return v is not None and v[0] <= version <= v[1]

    def nullable_in(self, version):
        n = self.nullable
        return n is not None and n[0] <= version <= n[1]

    def reader(self, version, flexible):
        """fn(reader) -> value, for this field at this version."""
        t, nullable = self.type, self.nullable_in(version)
        if t in _SCALARS:
            return _SCALARS[t][0]
        if t == "string":
            return lambda r: r.read_string(flexible, nullable)
        if t in ("bytes", "records"):
            return lambda r: r.read_bytes(flexible, nullable or t == "records")
        if t == "struct":
            return self.struct.decoder(version, flexible)
        if self.elem == "int32":
            def read_ints(r):
                n = r.read_array_len(flexible, nullable, 4)
                return None if n is None else r.read_int32_array(n)
            return read_ints
        if self.elem is not None:
            item = Field("item", self.elem).reader(version, flexible)
            size = _SCALARS[self.elem][3] if self.elem in _SCALARS else 1
        else:
            item = self.struct.decoder(version, flexible)
            size = 1

        def read_array(r):
            n = r.read_array_len(flexible, nullable, size)
            return None if n is None else tuple([item(r) for _ in range(n)])
        return read_array

    def writer(self, version, flexible):
        """fn(writer, value), for this field at this version."""
        t, nullable = self.type, self.nullable_in(version)
        if t in _SCALARS:
            return _SCALARS[t][1]
        if t == "string":
            return lambda w, v: w.write_string(v, flexible, nullable)
        if t == "records":
            return lambda w, v: w.write_records(v, flexible)
        if t == "bytes":
            return lambda w, v: w.write_bytes(v, flexible, nullable)
        if t == "struct":
            sub = self.struct
            return lambda w, v: sub.encode(w, v, version, flexible)
        if self.elem is not None:
            item = Field("item", self.elem).writer(version, flexible)
        else:
            sub = self.struct
            item = lambda w, v: sub.encode(w, v, version, flexible)  # noqa: E731

        def write_array(w, v):
            if v is None:
                return w.write_array_len(None, flexible, nullable)
            v = list(v)
            w.write_array_len(len(v), flexible)
            for x in v:
                item(w, x)
        return write_array


def _get(value, name, default):
    if isinstance(value, dict):
        return value.get(name, default)
    return getattr(value, name, default)


_FIXED_FORMATS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q",
                  "float64": "d", "bool": "?"}
_CONST, _UNPACK, _READ = 0, 1, 2


class Struct:
    """An ordered set of Fields with a namedtuple type for decoded values."""

    def __init__(self, name, fields):
        self.name = name
        self.fields = tuple(fields)
        self.type = namedtuple(name, [f.name for f in self.fields])
        self._decoders = {}
        self._encoders = {}

    def decode(self, r, version, flexible):
        return self.decoder(version, flexible)(r)

    def decoder(self, version, flexible):
        """fn(reader) -> namedtuple for this version, compiled once and cached."""
        fn = self._decoders.get((version, flexible))
        if fn is None:
            fn = self._decoders[(version, flexible)] = self._compile_decoder(version, flexible)
        return fn

    def _compile_decoder(self, version, flexible):
        # Steps in field order; runs of fixed-size fields are read with one struct unpack.
        steps, run, tag_readers, tag_index = [], [], {}, {}

        def end_run():
            if run:
                steps.append((_UNPACK, struct.Struct(">" + "".join(run))))
                del run[:]

        for i, f in enumerate(self.fields):
            if f.present(version) and f.tag is None:
                fmt = _FIXED_FORMATS.get(f.type)
                if fmt is not None:
                    run.append(fmt)
                    continue
                end_run()
                steps.append((_READ, f.reader(version, flexible)))
                continue
            end_run()
            steps.append((_CONST, f.default))
            if f.tag is not None and flexible and f.present(version):
                tag_readers[f.tag] = f.reader(version, flexible)
                tag_index[f.tag] = i
        end_run()
        make = self.type._make
        steps = tuple(steps)

        def decode(r):
            vals = []
            for kind, arg in steps:
                if kind == _UNPACK:
                    vals.extend(r.unpack(arg))
                elif kind == _READ:
                    vals.append(arg(r))
                else:
                    vals.append(arg)
            if flexible:
                for tag, v in r.read_tagged_fields(tag_readers).items():
                    vals[tag_index[tag]] = v
            return make(vals)
        return decode

    def _encode_plan(self, version, flexible):
        plan = self._encoders.get((version, flexible))
        if plan is None:
            present = [f for f in self.fields if f.present(version)]
            plan = self._encoders[(version, flexible)] = (
                tuple((f.name, f.default, f.writer(version, flexible))
                      for f in present if f.tag is None),
                tuple(sorted((f.tag, f.name, f.default, f.writer(version, flexible))
                             for f in present if f.tag is not None and flexible)),
            )
        return plan

    def encode(self, w, value, version, flexible):
        """Write ``value``: a dict, a plain tuple in field order, or an object with the field
        names as attributes (our namedtuples); missing names take the field default."""
        writers, tag_writers = self._encode_plan(version, flexible)
        if type(value) is tuple:
            if len(value) != len(self.fields):
                raise TypeError("%s needs %d values, got %r" % (self.name, len(self.fields), value))
            value = self.type._make(value)
        for name, default, write in writers:
            write(w, _get(value, name, default))
        if flexible:
            tags = {}
            for tag, name, default, write in tag_writers:
                v = _get(value, name, default)
                if v is not None and v != default:
                    sub = Writer()
                    write(sub, v)
                    tags[tag] = sub.getvalue()
            w.write_tagged_fields(tags)


class Api:
    """One Kafka API: key, supported versions, first flexible version, request/response Structs."""

    def __init__(self, key, name, min_version, max_version, flexible_from, request, response):
        self.key = key
        self.name = name
        self.min_version = min_version
        self.max_version = max_version
        self.flexible_from = flexible_from
        self.request = request
        self.response = response

    def flexible(self, version):
        return version >= self.flexible_from

    def check(self, version):
        if not isinstance(version, int) or not self.min_version <= version <= self.max_version:
            raise ValueError("%s version %r is not supported (v%d..v%d)"
                             % (self.name, version, self.min_version, self.max_version))

    def _encode(self, struct, version, value):
        self.check(version)
        w = Writer()
        struct.encode(w, value, version, self.flexible(version))
        return w.getvalue()

    def _decode(self, struct, version, data, strict=True):
        self.check(version)
        r = as_reader(data)
        value = struct.decode(r, version, self.flexible(version))
        if strict:
            r.expect_end("%s v%d" % (struct.name, version))
        return value

    def encode_request(self, version, value):
        return self._encode(self.request, version, value)

    def decode_response(self, version, data, strict=True):
        """strict=False ignores bytes after a complete message (the Java client does)."""
        return self._decode(self.response, version, data, strict)

    # the broker's side, for tests and mock brokers
    def encode_response(self, version, value):
        return self._encode(self.response, version, value)

    def decode_request(self, version, data):
        return self._decode(self.request, version, data)
