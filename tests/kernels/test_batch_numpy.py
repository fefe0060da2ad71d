"""send_batch's numpy and pandas columns (BatchSendPath.send) on both implementations, without a
network: each dtype gives the same record bytes as the equivalent Python lists, the compiled
twin reading the arrays' buffers and the pure one their tolist(); bad dtypes and values raise
the same errors in both before any record is appended."""
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from test_batch_send import TS0, _drain_all, _paths, _payloads, _records

VALUES = [b"ab\x00c\x00\x00", b"", b"\x00", b"xyz", b"\x00lead", b"v" * 9]
KEYS = ["h\u00e9\x00", "", "\U0001F600z", "\u4e2d\u6587", "\x00", "k"]
PARTS = [0, 5, 3, 3, 1, 0]
STAMPS = [TS0, TS0 + 1, 0, TS0 + 999, 1 << 40, TS0]
N = len(VALUES)


def _stripped(values):
    """numpy's S semantics: trailing NULs are not part of a value."""
    return [v.rstrip(b"\x00") for v in values]


def _lists(values=VALUES, keys=KEYS, parts=PARTS, stamps=STAMPS):
    return dict(values=_stripped(values), keys=[k.rstrip("\x00").encode() for k in keys],
                partitions=list(parts), timestamps=list(stamps))


def _send(k, **kwargs):
    acc, sp, bp, _ = _paths(k)
    bp.send("t", **kwargs)
    return _payloads(_drain_all(acc))


def _forms():
    """(name, the send_batch arguments) of the same records in numpy and pandas forms."""
    v, kk = np.array(VALUES, "S9"), np.array(KEYS, "U4")
    stamps64 = np.array(STAMPS, "int64")
    yield "S U i8 i8", dict(values=v, keys=kk, partitions=np.array(PARTS), timestamps=stamps64)
    for dt in ("i1", "u1", "i2", "u2", ">i4", "<u4", ">i8", "u8"):
        yield "partitions " + dt, dict(values=v, keys=kk, partitions=np.array(PARTS, dt),
                                       timestamps=stamps64)
    yield "big-endian U, >i8 stamps", dict(values=v, keys=np.array(KEYS, ">U6"),
                                           partitions=PARTS, timestamps=stamps64.astype(">i8"))
    for unit in ("ms", "us", "ns"):
        scale = {"ms": 1, "us": 1000, "ns": 10**6}[unit]
        yield "datetime64[%s]" % unit, dict(
            values=v, keys=kk, partitions=PARTS,
            timestamps=(stamps64 * scale).astype("datetime64[%s]" % unit))
    yield "u8 timestamps", dict(values=v, keys=kk, partitions=PARTS,
                                timestamps=stamps64.astype("u8"))
    pad = lambda a: np.repeat(a, 2)  # noqa: E731 (every other one: a strided view)
    yield "strided", dict(values=pad(v)[::2], keys=pad(kk)[1::2],
                          partitions=pad(np.array(PARTS, ">i2"))[::2],
                          timestamps=pad(stamps64.astype("datetime64[ms]"))[::2])
    yield "object arrays", dict(values=np.array(_stripped(VALUES), object),
                                keys=np.array([k.rstrip("\x00") for k in KEYS], object),
                                partitions=np.array(PARTS, object),
                                timestamps=np.array(STAMPS, object))
    yield "wider S", dict(values=np.array(VALUES, "S40"), keys=np.array(KEYS, "U40"),
                          partitions=PARTS, timestamps=STAMPS)
    yield "pandas numpy-backed", dict(values=pd.Series(v), keys=pd.Index(kk),
                                      partitions=pd.Series(PARTS, dtype="int16"),
                                      timestamps=pd.Series(stamps64.astype("datetime64[ms]")))
    yield "pandas nullable and tz", dict(
        values=pd.Series(_stripped(VALUES)), keys=pd.Series(
            [k.rstrip("\x00") for k in KEYS], dtype="string[pyarrow]"),
        partitions=pd.Series(PARTS, dtype="Int64"),
        timestamps=pd.Series(pd.to_datetime(STAMPS, unit="ms")).dt.tz_localize("UTC")
        .dt.tz_convert("Asia/Tokyo"))
    yield "pandas arrow dtypes", dict(
        values=pd.Series(_stripped(VALUES), dtype=pd.ArrowDtype(pa.binary())),
        keys=pd.Series([k.rstrip("\x00") for k in KEYS], dtype=pd.ArrowDtype(pa.string())),
        partitions=pd.Series(PARTS, dtype=pd.ArrowDtype(pa.uint8())),
        timestamps=pd.Series(STAMPS, dtype=pd.ArrowDtype(pa.timestamp("ms"))))
    yield "pandas datetime64[ns] index", dict(
        values=v, keys=kk, partitions=PARTS,
        timestamps=pd.DatetimeIndex(pd.to_datetime(STAMPS, unit="ms")))


@pytest.mark.parametrize("name", [name for name, _ in _forms()])
def test_every_numpy_form_gives_the_bytes_of_lists(both, name):
    kwargs = dict(_forms())[name]
    expect = _send(both[0], **_lists())
    for k in both:
        assert _send(k, **kwargs) == expect, (k.pure, name)


def test_values_and_keys_read_as_expected(k):
    acc, sp, bp, _ = _paths(k)
    bp.send("t", np.array(VALUES, "S9"), keys=np.array(KEYS, "U4"), partitions=[0] * N,
            timestamps=np.array(STAMPS, "int64"))
    got = _records(_drain_all(acc))[0]
    assert [r[1] for r in got] == [b"ab\x00c", b"", b"", b"xyz", b"\x00lead", b"v" * 9]
    assert [r[0] for r in got] == [b"h\xc3\xa9", b"", b"\xf0\x9f\x98\x80z",
                                   "\u4e2d\u6587".encode(), b"", b"k"]
    assert [r[3] for r in got] == STAMPS


def test_the_custom_partitioner_rows_match(both):
    """prepare_rows (send_batch with a custom partitioner) reads the same per-record values."""
    kwargs = dict(_forms())["strided"]
    rows = [k.prepare_rows("t", kwargs["values"], kwargs["keys"], None, kwargs["partitions"],
                           kwargs["timestamps"]) for k in both]
    lists = _lists()
    assert rows[0] == rows[1] == [lists["values"], lists["keys"], [None] * N,
                                  lists["partitions"], lists["timestamps"]]


def test_nat_and_na_are_now(k):
    acc, sp, bp, _ = _paths(k)
    before = int(time.time() * 1000)
    stamps = np.array([TS0, "NaT", TS0 + 5], "datetime64[ms]")
    bp.send("t", np.array([b"a", b"b", b"c"]), partitions=pd.Series([2, None, 2], dtype="Int64"),
            timestamps=stamps)
    bp.send("t", np.array([b"d", b"e"]), partitions=np.array([3, 3], "u2"),
            timestamps=pd.Series([pd.NaT, pd.Timestamp(TS0, unit="ms", tz="UTC")]))
    bp.send("t", np.array([b"f"]), partitions=np.array([4]),
            timestamps=pd.Series([None], dtype="Int64"))
    after = int(time.time() * 1000)
    got = _records(_drain_all(acc))
    assert [(r[1], r[3]) for r in got[2]] == [(b"a", TS0), (b"c", TS0 + 5)]
    (b,) = [r for rs in got.values() for r in rs if r[1] == b"b"]  # the partitioner's
    assert before <= b[3] <= after
    assert got[3][0][1] == b"d" and before <= got[3][0][3] <= after and got[3][1][3] == TS0
    assert before <= got[4][0][3] <= after


def test_other_datetime64_units(k):
    acc, sp, bp, _ = _paths(k)
    march, y2024 = 1_709_251_200_000, 1_704_067_200_000
    cases = [(np.array(["2024-03-01"], "datetime64[D]"), march),
             (np.array(["2024-03"], "datetime64[M]"), march),
             (np.array(["2024"], "datetime64[Y]"), y2024),
             (np.array([1_709_251_200], "datetime64[s]"), march),
             (np.array([2_999_999_999], "datetime64[ps]"), 2),
             (np.array([1_999_999_999_999], "datetime64[fs]"), 1),
             (np.array([170_925_120_000], "datetime64[10ms]"), march),
             (np.array([17_092_512_000_000], "datetime64[100us]"), march),
             (np.array([28_487_520], "datetime64[m]"), march),
             (np.array([474_792], "datetime64[h]"), march),
             (np.array([2823], "datetime64[W]"), 2823 * 7 * 86_400_000),
             (np.array(["NaT", "NaT"], "datetime64")[:1], None)]
    before = int(time.time() * 1000)
    for stamps, _ in cases:
        bp.send("t", [b"x"], partitions=[0], timestamps=stamps)
    got = [r[3] for r in _records(_drain_all(acc))[0]]
    assert got[:-1] == [ms for _, ms in cases[:-1]]
    assert before <= got[-1]


def test_the_largest_unit_multiples_do_not_overflow(k):
    """numpy caps a unit's multiple at 2**31 - 1: its ms factor still fits int64, and a value
    past the timestamp range is the usual ValueError, not a wrapped number."""
    acc, sp, bp, _ = _paths(k)
    bp.send("t", [b"x"], partitions=[0],
            timestamps=np.array([1], "datetime64[2147483647W]"))
    assert [r[3] for r in _records(_drain_all(acc))[0]] == [2147483647 * 7 * 86_400_000]
    with pytest.raises(ValueError, match=r"timestamps\[0\] is out of range"):
        bp.send("t", [b"x"], timestamps=np.array([1], "datetime64[2147483647Y]"))


def test_empty_arrays(k):
    acc, sp, bp, _ = _paths(k)
    for v, kk in ((np.array([], "S3"), np.array([], "U2")), (pd.Series([], dtype=object), None),
                  (np.array([], object), np.array([], "S0"))):
        fut = bp.send("nowhere", v, keys=kk, partitions=np.array([], "u8"),
                      timestamps=np.array([], "datetime64[ns]"))
        assert fut.get(0).record_count == 0


def test_s_and_u_are_raw_bytes_past_the_serializers(k):
    """S and U arrays go as Arrow's do (raw bytes); object arrays are put through them."""
    acc, sp, bp, _ = _paths(k)
    bp.value_serializer = lambda topic, headers, v: b"<" + (v if isinstance(v, bytes)
                                                             else v.encode()) + b">"
    bp.send("t", np.array([b"a"]), partitions=[0])
    bp.send("t", np.array(["b"]), partitions=[0])
    bp.send("t", np.array([b"c"], object), partitions=[0])
    assert [r[1] for r in _records(_drain_all(acc))[0]] == [b"a", b"b", b"<c>"]


BAD = [
    (dict(values=np.array([1.5])), TypeError,
     "values: a numpy array of dtype float64 is not supported (object, S or U)"),
    (dict(values=np.array([True])), TypeError, "dtype bool is not supported"),
    (dict(values=np.array([b"a"]), keys=np.array([1 + 2j])), TypeError,
     "keys: a numpy array of dtype complex128"),
    (dict(values=np.zeros(1, [("a", "i4")])), TypeError, "values: a numpy array of dtype"),
    (dict(values=np.ma.array([b"a"])), TypeError, "values: a numpy masked array"),
    (dict(values=np.array([[b"a"]])), ValueError, "one dimension, not 2"),
    (dict(values=np.array([b"a"]), headers=np.array([1])), TypeError,
     "headers: a numpy array of dtype int64 is not supported (object)"),
    (dict(values=np.array([b"a", b"b"]), keys=np.array([b"k"])), ValueError,
     "keys has 1 entries but values has 2"),
    (dict(values=np.array([b"a"]), partitions=np.array([0, 1])), ValueError,
     "partitions has 2 entries but values has 1"),
    (dict(values=np.array([b"a", b"b"]), partitions=np.array([0, -1])), ValueError,
     "partitions[1] is out of range: -1"),
    (dict(values=np.array([b"a"]), partitions=np.array([1 << 31], "u8")), ValueError,
     "partitions[0] is out of range: 2147483648"),
    (dict(values=np.array([b"a"]), partitions=np.array([1 << 63], "u8")), ValueError,
     "partitions[0] is out of range: 9223372036854775808"),
    (dict(values=np.array([b"a"]), partitions=np.array([0.0])), TypeError,
     "partitions: a numpy array of dtype float64 is not supported"),
    (dict(values=np.array([b"a"]), partitions=np.array([True])), TypeError,
     "partitions: a numpy array of dtype bool"),
    (dict(values=np.array([b"a"]), partitions=np.array(["2024"], "datetime64[D]")), TypeError,
     "partitions: a numpy array of dtype datetime64[D]"),
    (dict(values=np.array([b"a"]), timestamps=np.array([-5], ">i2")), ValueError,
     "timestamps[0] is out of range: -5"),
    (dict(values=np.array([b"a", b"b"]), timestamps=np.array([0, -1], "datetime64[ns]")),
     ValueError, "timestamps[1] is out of range: -1"),
    (dict(values=np.array([b"a"]), timestamps=np.array([1 << 62], "datetime64[s]")),
     ValueError, "timestamps[0] is out of range: 4611686018427387904"),
    (dict(values=np.array([b"a"]), timestamps=np.array([1], "timedelta64[ms]")), TypeError,
     "timestamps: a numpy array of dtype timedelta64[ms]"),
    (dict(values=np.array(["ok", "x\ud800"])), ValueError,
     "values[1]: code point U+D800 cannot be encoded as UTF-8"),
    (dict(values=np.array([b"a"]), keys=np.array([0x110000], "u4").view("U1")), ValueError,
     "keys[0]: code point U+110000 cannot be encoded as UTF-8"),
    (dict(values=pd.Series([1.0])), TypeError,
     "values: a numpy array of dtype float64 is not supported"),
    (dict(values=pd.Series([1], dtype="Int64")), TypeError,
     "values: a pandas Series of dtype Int64 is not supported (object, S or U)"),
    (dict(values=np.array([b"a"]), partitions=pd.Series([1.0], dtype="Float64")), TypeError,
     "partitions: a pandas Series of dtype Float64 is not supported"),
    (dict(values=np.array([b"a"]), partitions=pd.Series([-1], dtype="Int8")), ValueError,
     "partitions[0] is out of range: -1"),
    (dict(values=np.array([b"a"]), partitions=np.array([1.5], object)), TypeError,
     "partitions[0] must be an int or None"),
    (dict(values=np.array([b"a", 3], object)), TypeError, "values[1]: expected bytes"),
]


@pytest.mark.parametrize("bad, error, message", BAD, ids=[m[:40] for _, _, m in BAD])
def test_bad_input_is_refused_before_anything_is_appended(both, bad, error, message):
    for k in both:
        acc, sp, bp, _ = _paths(k)
        with pytest.raises(error) as info:
            bp.send("t", [b"ok"], partitions=[0])  # (appended: shows the check sees it)
            bp.send("t", **bad)
        assert message in str(info.value), (k.pure, str(info.value))
        batches = _drain_all(acc)
        assert sum(b.record_count for b in batches) == 1
