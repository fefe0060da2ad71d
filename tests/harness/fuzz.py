"""Fuzzing the code that parses bytes from the network: a message generator, a mutator, a check.

- ``generate(struct, version, flexible, rng, lie=0.0)``: a random encoding of a protocol Struct
  (pyprod.protocol.wire), written field by field: random values, non-minimal varints, unknown
  tagged fields. ``lie`` is the chance that a length, count or tag size is false (huge,
  negative, null where none is allowed, one off); with ``lie=0`` the bytes always decode.
- ``mutate(data, rng, others)``: 1-3 byte-level mutations (bit flips, interesting values at
  random offsets, int16/int32/int64 fields set to huge or negative values, overlong and huge
  varints, truncation, deletion, duplication, insertion, splicing with another input).
- ``check(target, case, data)``: runs a target (and its twin); returns None, or a Finding when an
  exception is not a ``KafkaError`` subclass, the twins disagree, or the input is slow.
- ``run(target, count, rng)``: ``count`` generated/mutated inputs through ``check``.

The targets themselves are in tests.harness.fuzz_targets; tests/fuzz runs a bounded number of
inputs through Hypothesis and scripts/fuzz.py the long run.
"""
import time
import traceback
from collections import namedtuple

from pyprod.errors import KafkaError
from pyprod.protocol.wire import Writer

__all__ = ["Target", "Finding", "generate", "mutate", "check", "one_input", "inputs", "run",
           "allocation_peak", "uvarint_bytes", "tagged_section"]

# ---- targets and findings ----------------------------------------------------------------------


class Target:
    """A decoder under test.

    ``cases``: what varies besides the bytes (e.g. API versions). ``seed(case, rng, lie)``: a
    valid input for that case (a false length now and then with ``lie`` > 0). ``run(case,
    data)``: the decode; it returns a value or raises a KafkaError. ``twin(case, data)``: the
    same decode by another implementation (None if there is none); both must give the same
    value or the same exception type.
    """

    def __init__(self, name, cases, seed, run, twin=None, doc=""):
        self.name = name
        self.cases = tuple(cases)
        self.seed = seed
        self.run = run
        self.twin = twin
        self.doc = doc

    def __repr__(self):
        return "<fuzz target %s>" % self.name


# kind: "untyped" (an exception that is not a KafkaError), "disagree" (the twins differ) or "slow"
Finding = namedtuple("Finding", "target case kind error where data detail")


def _where(exc):
    """file:line of the innermost frame that raised ``exc`` (to group findings)."""
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return "?"
    f = tb[-1]
    return "%s:%d" % (f.filename.rsplit("/", 1)[-1], f.lineno)


def _outcome(fn, case, data):
    """("ok", value) | ("error", KafkaError type) | ("untyped", exception)."""
    try:
        return "ok", fn(case, data)
    except KafkaError as e:
        return "error", type(e)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: B036 (RecursionError, MemoryError, ... are findings too)
        return "untyped", e


def check(target, case, data, slow_s=1.0):
    """None if ``target`` handled ``data`` correctly, else a Finding."""
    t0 = time.perf_counter()
    first = _outcome(target.run, case, data)
    elapsed = time.perf_counter() - t0
    if first[0] == "untyped":
        e = first[1]
        return Finding(target.name, case, "untyped", type(e).__name__, _where(e), bytes(data),
                       str(e)[:200])
    if elapsed > slow_s:
        return Finding(target.name, case, "slow", "", "", bytes(data), "%.2f s" % elapsed)
    if target.twin is None:
        return None
    second = _outcome(target.twin, case, data)
    if second[0] == "untyped":
        e = second[1]
        return Finding(target.name + " (twin)", case, "untyped", type(e).__name__, _where(e),
                       bytes(data), str(e)[:200])
    if first != second:
        return Finding(target.name, case, "disagree", "", "", bytes(data),
                       "%r != %r" % (first, second))
    return None


def allocation_peak(fn, *args):
    """(what ``fn(*args)`` returned or the KafkaError it raised, the peak of the memory Python
    allocated meanwhile, in bytes): to show a claimed size is refused before allocating."""
    import tracemalloc
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = fn(*args)
    except KafkaError as e:
        result = e
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()
    return result, peak


def one_input(target, rng, recent=(), lie=0.2, mutated=0.8):
    """One (case, data) for ``target``: a seed (with false lengths half the time when ``lie``),
    mutated with probability ``mutated`` (splicing with ``recent`` inputs), or random bytes."""
    case = rng.choice(target.cases)
    roll = rng.random()
    if roll < 0.03:
        return case, rng.randbytes(rng.randrange(64))
    data = target.seed(case, rng, lie if rng.random() < 0.5 else 0.0)
    if roll < mutated:
        data = mutate(data, rng, recent)
    return case, data


def inputs(target, rng, lie=0.2, mutated=0.8):
    """Endless (case, data) pairs for ``target`` (see one_input)."""
    recent = [b""]
    while True:
        case, data = one_input(target, rng, recent, lie, mutated)
        if len(recent) < 8:
            recent.append(data)
        else:
            recent[rng.randrange(8)] = data
        yield case, data


def run(target, count, rng, on_finding=None, slow_s=1.0):
    """Check ``count`` inputs; returns the findings (also passed to ``on_finding``)."""
    findings = []
    gen = inputs(target, rng)
    for _ in range(count):
        case, data = next(gen)
        f = check(target, case, data, slow_s)
        if f is not None:
            findings.append(f)
            if on_finding is not None:
                on_finding(f)
    return findings


# ---- mutations -----------------------------------------------------------------------------------

_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
_INTS = {
    2: (-1, -2, 0, 1, 0x7FFF, -0x8000, 0x7FFE),
    4: (-1, -2, 0, 1, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0x7FFF, 0x10000, 0x100000),
    8: (-1, 0, 1, (1 << 63) - 1, -(1 << 63), 1 << 40),
}
_VARINTS = (
    b"\xff\xff\xff\xff\x0f",          # 2^32-1: a compact length of 2^32-2
    b"\xff\xff\xff\xff\x07",          # 2^31-1: a compact length of 2^31-2
    b"\x80\x80\x80\x80\x08",          # 2^31: a compact length of 2^31-1
    b"\x80\x80\x80\x80\x10",          # 2^32: too big for 32 bits
    b"\x80\x80\x80\x80\x80\x01",      # six bytes: overlong
    b"\x80\x80\x80\x80\x00",          # 0 in five bytes (valid, non-minimal)
    b"\x81\x80\x80\x80\x00",          # 1 in five bytes
    b"\xff" * 10 + b"\x01",           # a varlong too long
    b"\x80",                          # a varint cut short
    b"\x00",
)


def _flip(d, rng):
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(d))
        d[i] ^= 1 << rng.randrange(8)


def _set_byte(d, rng):
    d[rng.randrange(len(d))] = rng.choice(_BYTES) if rng.random() < 0.7 else rng.randrange(256)


def _set_int(d, rng):
    width = rng.choice((2, 4, 4, 8))
    if len(d) < width:
        return
    i = rng.randrange(len(d) - width + 1)
    d[i:i + width] = rng.choice(_INTS[width]).to_bytes(width, "big", signed=True)


def _varint(d, rng):
    i = rng.randrange(len(d) + 1)
    v = rng.choice(_VARINTS)
    n = rng.choice((0, 1, 1, len(v)))  # insert, or overwrite a one-byte varint, or overwrite
    d[i:i + n] = v


def _truncate(d, rng):
    del d[rng.randrange(len(d)):]


def _delete(d, rng):
    i = rng.randrange(len(d))
    del d[i:i + rng.randint(1, 8)]


def _duplicate(d, rng):
    i = rng.randrange(len(d))
    j = min(len(d), i + rng.randint(1, 32))
    k = rng.randrange(len(d) + 1)
    d[k:k] = d[i:j]


def _insert(d, rng):
    k = rng.randrange(len(d) + 1)
    d[k:k] = rng.randbytes(rng.randint(1, 8))


def _splice(d, rng, others):
    other = rng.choice(others)
    i = rng.randrange(len(d) + 1)
    j = rng.randrange(len(other) + 1)
    d[i:] = other[j:]


def _append(d, rng):
    d += rng.randbytes(rng.randint(1, 16))


_MUTATIONS = (_flip, _flip, _set_byte, _set_byte, _set_int, _set_int, _varint, _varint,
              _truncate, _delete, _duplicate, _insert, _append)


def mutate(data, rng, others=()):
    """``data`` with 1-3 random mutations (bytes)."""
    d = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not d:
            d += rng.randbytes(rng.randint(1, 8))
            continue
        if others and rng.random() < 0.05:
            _splice(d, rng, others)
        else:
            rng.choice(_MUTATIONS)(d, rng)
    return bytes(d)


# ---- generating protocol messages ---------------------------------------------------------------


def uvarint_bytes(v, pad=0):
    """Unsigned varint ``v``, with ``pad`` extra (non-minimal) continuation bytes."""
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    if pad:
        out.append(v | 0x80)
        out += b"\x80" * (pad - 1)
        v = 0
    out.append(v)
    return bytes(out)


def _uvarint(w, v, rng, max_bytes=5):
    """An unsigned varint, sometimes non-minimal (still at most ``max_bytes`` long)."""
    data = uvarint_bytes(v)
    room = max_bytes - len(data)
    if room > 0 and rng.random() < 0.05:
        data = uvarint_bytes(v, rng.randint(1, room))
    w.write_raw(data)


_STRINGS = ("", "a", "topic", "tópic-ü", "127.0.0.1", "x" * 40, "\u4e2d\u6587", "\U0001f600")


def _length(w, n, compact, short, nullable, rng, lie):
    """Write the length ``n`` (None: null) of a string (``short``), bytes or array."""
    if lie and rng.random() < lie:
        choice = rng.randrange(6)
        if choice == 0:
            n = 0x7FFF if short and not compact else 0x7FFFFFFF
        elif choice == 1:
            n = -2 if rng.random() < 0.5 else (-0x8000 if short else -0x80000000)
        elif choice == 2:
            n = None
            nullable = True
        elif choice == 3 and compact:
            w.write_raw(rng.choice(_VARINTS))
            return
        else:
            n = (n or 0) + rng.choice((-1, 1))
    if n is None:
        if not nullable:
            n = 0
        elif compact:
            w.write_raw(b"\x00")
            return
        else:
            w.write_raw(b"\xff\xff" if short else b"\xff\xff\xff\xff")
            return
    if compact:
        _uvarint(w, max(0, n + 1), rng)
    elif short:
        w.write_raw(max(-0x8000, min(n, 0x7FFF)).to_bytes(2, "big", signed=True))
    else:
        w.write_raw(max(-0x80000000, min(n, 0x7FFFFFFF)).to_bytes(4, "big", signed=True))


def _int(rng, bits):
    if rng.random() < 0.3:
        return rng.choice((0, -1, 1, (1 << (bits - 1)) - 1, -(1 << (bits - 1))))
    return rng.randrange(-(1 << (bits - 1)), 1 << (bits - 1)) if rng.random() < 0.3 \
        else rng.randrange(0, 1000)


# error codes the client acts on: NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER, INVALID_TOPIC,
# TOPIC_AUTHORIZATION_FAILED, UNSUPPORTED_SASL_MECHANISM, UNSUPPORTED_VERSION, ..., unknown ones
_ERROR_CODES = (0, 0, 0, 3, 6, 15, 17, 29, 31, 33, 35, 45, 46, 58, 59, 67, -1, 9999)


def _scalar(w, type_, rng, name=""):
    if type_ == "int16" and name.endswith("error_code") and rng.random() < 0.7:
        w.write_int16(rng.choice(_ERROR_CODES))
    elif type_ == "int8":
        w.write_int8(_int(rng, 8))
    elif type_ == "int16":
        w.write_int16(_int(rng, 16))
    elif type_ == "uint16":
        w.write_uint16(rng.randrange(1 << 16))
    elif type_ == "int32":
        w.write_int32(_int(rng, 32))
    elif type_ == "int64":
        w.write_int64(_int(rng, 64))
    elif type_ == "float64":
        w.write_raw(rng.randbytes(8))
    elif type_ == "bool":
        w.write_raw(bytes((rng.choice((0, 1, 1, 2, 0xFF)),)))
    elif type_ == "uuid":
        w.write_raw(rng.randbytes(16))
    else:
        raise ValueError("not a scalar type: %r" % type_)


def _string(w, compact, nullable, rng, lie):
    if nullable and rng.random() < 0.15:
        return _length(w, None, compact, True, True, rng, lie)
    data = rng.choice(_STRINGS).encode("utf-8")
    if lie and rng.random() < lie / 10:
        data = b"\xff\xc3" + data  # not UTF-8
    _length(w, len(data), compact, True, nullable, rng, lie)
    w.write_raw(data)


def _bytes(w, compact, nullable, rng, lie):
    if nullable and rng.random() < 0.15:
        return _length(w, None, compact, False, True, rng, lie)
    data = rng.randbytes(rng.choice((0, 1, 4, 16, 61)))
    _length(w, len(data), compact, False, nullable, rng, lie)
    w.write_raw(data)


def _field(w, f, version, flexible, rng, lie):
    t, nullable = f.type, f.nullable_in(version)
    if t in ("string",):
        return _string(w, flexible, nullable, rng, lie)
    if t in ("bytes", "records"):
        return _bytes(w, flexible, nullable or t == "records", rng, lie)
    if t == "struct":
        return generate_into(w, f.struct, version, flexible, rng, lie)
    if t.startswith("[]"):
        if nullable and rng.random() < 0.1:
            return _length(w, None, flexible, False, True, rng, lie)
        n = rng.choice((0, 1, 1, 2, 3))
        _length(w, n, flexible, False, nullable, rng, lie)
        for _ in range(n):
            if f.elem is None:
                generate_into(w, f.struct, version, flexible, rng, lie)
            elif f.elem == "string":
                _string(w, flexible, False, rng, lie)
            else:
                _scalar(w, f.elem, rng)
        return None
    return _scalar(w, t, rng, f.name)


def _tagged_fields(w, fields, rng, lie, known=()):
    """A tagged-field section: ``fields`` maps tag -> encoded bytes; adds tags not in
    ``known`` with random bytes."""
    fields = dict(fields)
    for _ in range(rng.choice((0, 0, 0, 1, 2))):
        tag = rng.choice((rng.randrange(16), rng.randrange(1 << 14), 0xFFFFFFFF))
        if tag not in known and tag not in fields:
            fields[tag] = rng.randbytes(rng.choice((0, 1, 3, 20)))
    if lie and rng.random() < lie / 4:
        w.write_raw(rng.choice(_VARINTS))  # a false count
    else:
        _uvarint(w, len(fields), rng)
    for tag in sorted(fields):  # sorted, as Kafka writes them
        data = fields[tag]
        _uvarint(w, tag, rng)
        if lie and rng.random() < lie / 4:
            w.write_raw(rng.choice(_VARINTS))  # a false size
        else:
            _uvarint(w, len(data), rng)
        w.write_raw(data)


def generate_into(w, struct, version, flexible, rng, lie=0.0):
    """Write a random ``struct`` at ``version`` to Writer ``w`` (see ``generate``)."""
    tagged = {}
    for f in struct.fields:
        if not f.present(version):
            continue
        if f.tag is None:
            _field(w, f, version, flexible, rng, lie)
        elif flexible and rng.random() < 0.5:
            sub = Writer()
            _field(sub, f, version, flexible, rng, lie)
            tagged[f.tag] = sub.getvalue()
    if flexible:
        known = [f.tag for f in struct.fields if f.tag is not None and f.present(version)]
        _tagged_fields(w, tagged, rng, lie, known)


def generate(struct, version, flexible, rng, lie=0.0):
    """Random bytes of ``struct`` at ``version`` (valid unless ``lie`` > 0 made a length
    false)."""
    w = Writer()
    generate_into(w, struct, version, flexible, rng, lie)
    return w.getvalue()


def tagged_section(rng, lie=0.0):
    """A tagged-field section of unknown tags only (e.g. for a response header v1)."""
    w = Writer()
    _tagged_fields(w, {}, rng, lie)
    return w.getvalue()
