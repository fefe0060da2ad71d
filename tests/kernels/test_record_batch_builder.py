"""RecordBatchBuilder (both implementations): batches decoded by kafka-python's reader."""
import random
import struct
import time

import cramjam
import pytest

import kcore
from pyprod.errors import IllegalStateError, UnsupportedCodecError

default_records = pytest.importorskip("kafka.record.default_records")
kafka_codec = pytest.importorskip("kafka.codec")
from kafka.record.memory_records import MemoryRecords  # noqa: E402

CODECS = list(kcore.compression_type.NAMES)  # every codec the registry has: a new one is tested
# The protocol's attribute ids (Kafka's CompressionType), written here independently of kcore.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADER = 61


def wrap64(v):
    return (v + 2**63) % 2**64 - 2**63


def random_records(seed, n=60, big=False):
    """(timestamp, key, value, headers) tuples covering nulls, unicode header keys, spread and
    out-of-order timestamps; big adds ~1 MB values."""
    rng = random.Random(seed)
    base = 1_700_000_000_000
    out = []
    for i in range(n):
        ts = base + rng.choice([0, 1, -1, rng.randrange(-10**6, 10**6), rng.randrange(10**9)])
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 1, 5, 40, 300]))
        if big and i % 20 == 7:
            value = rng.randbytes(1_000_000) if i % 40 == 7 else b"z" * 1_100_000
        else:
            value = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 100, 127, 128, 5000]))
        headers = []
        for j in range(rng.choice([0, 0, 1, 3])):
            hkey = rng.choice(["trace", "clé", "日本語", "", "k%d" % j])
            hval = None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 3, 200]))
            headers.append((hkey, hval))
        out.append((ts, key, value, headers))
    return out


def build(k, records, max_size=1 << 26, **kw):
    b = k.RecordBatchBuilder(max_size, **kw)
    for r in records:
        assert b.append(*r) is True
    assert len(b) == len(records)
    return b.build()


def check_batch(data, records, codec="none", producer_id=-1, producer_epoch=-1,
                base_sequence=-1, transactional=False):
    assert type(data) is bytes
    batch = default_records.DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.base_offset == 0
    assert batch.size_in_bytes == len(data)
    assert batch.leader_epoch == -1
    assert batch.magic == 2
    assert batch.attributes == CODEC_IDS[codec] | (0x10 if transactional else 0)
    assert batch.compression_type == CODEC_IDS[codec]
    assert batch.timestamp_type == 0
    assert batch.is_transactional == transactional
    assert not batch.is_control_batch
    assert batch.last_offset_delta == len(records) - 1
    assert batch.records_count == len(records)
    assert batch.first_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert batch.producer_id == producer_id
    assert batch.producer_epoch == producer_epoch
    assert batch.base_sequence == base_sequence
    got = list(batch)
    assert len(got) == len(records)
    for i, (rec, (ts, key, value, headers)) in enumerate(zip(got, records)):
        assert rec.offset == i
        assert wrap64(rec.timestamp) == ts  # Java's long arithmetic; kafka-python's is unbounded
        assert rec.timestamp_type == 0
        assert rec.key == (None if key is None else bytes(key))
        assert rec.value == (None if value is None else bytes(value))
        assert [(hk, hv if hv is None else bytes(hv)) for hk, hv in rec.headers] == \
            [(hk, hv if hv is None else bytes(hv)) for hk, hv in headers]
    # the same through MemoryRecords: exactly one batch
    mem = MemoryRecords(data)
    assert mem.valid_bytes() == len(data)
    assert mem.next_batch() is not None and mem.next_batch() is None
    return batch


@pytest.mark.parametrize("codec", CODECS)
def test_random_records_decode(k, codec):
    records = random_records(1)
    data = build(k, records, compression=codec)
    check_batch(data, records, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_large_values_decode(k, codec):
    records = random_records(2, n=45, big=True)
    data = build(k, records, compression=codec)
    check_batch(data, records, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_producer_state_and_transactional(k, codec):
    records = random_records(3, n=10)
    kw = dict(producer_id=123456789012, producer_epoch=7, base_sequence=2**31 - 5,
              transactional=True)
    data = build(k, records, compression=codec, **kw)
    check_batch(data, records, codec, **kw)


@pytest.mark.parametrize("codec", CODECS)
def test_identical_bytes(both, codec):
    py, c = both
    for seed in (4, 5):
        records = random_records(seed, big=seed == 5)
        kw = dict(compression=codec, producer_id=9, producer_epoch=1, base_sequence=0)
        assert build(py, records, **kw) == build(c, records, **kw)


def test_compression_none_is_default_and_none_accepted(k):
    records = random_records(6, n=5)
    assert build(k, records) == build(k, records, compression="none") == \
        build(k, records, compression=None)


def test_records_match_kafka_python_encoding(k):
    """Uncompressed records section byte-identical to kafka-python's builder."""
    records = random_records(7)
    ours = build(k, records)
    ref = default_records.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 26)
    for i, (ts, key, value, headers) in enumerate(records):
        assert ref.append(i, ts, key, value, headers) is not None
    theirs = bytes(ref.build())
    assert ours[HEADER:] == theirs[HEADER:]
    # header: equal apart from partitionLeaderEpoch (kafka-python writes 0) and the CRC
    assert ours[:12] == theirs[:12] and ours[16:17] == theirs[16:17]
    assert ours[21:HEADER] == theirs[21:HEADER]


def test_codec_framing(k):
    payload = [(1, None, bytes(range(256)) * 400, [])]  # ~100 KiB: several snappy chunks
    raw = build(k, payload)[HEADER:]

    snappy = build(k, payload, compression="snappy")[HEADER:]
    assert snappy[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks = 16, []
    while pos < len(snappy):
        (n,) = struct.unpack_from(">i", snappy, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(snappy[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(snappy)
    assert [len(c) for c in chunks[:-1]] == [32768] * (len(chunks) - 1) and len(chunks) >= 3
    assert b"".join(chunks) == raw

    lz4 = build(k, payload, compression="lz4")[HEADER:]
    assert lz4[:4] == b"\x04\x22\x4d\x18" and lz4[4] & 0x20  # LZ4 frame, independent blocks
    assert bytes(cramjam.lz4.decompress(lz4)) == raw

    gz = build(k, payload, compression="gzip")[HEADER:]
    assert gz[:2] == b"\x1f\x8b"
    import gzip
    assert gzip.decompress(gz) == raw

    zst = build(k, payload, compression="zstd")[HEADER:]
    assert zst[:4] == b"\x28\xb5\x2f\xfd"
    assert bytes(cramjam.zstd.decompress(zst)) == raw


@pytest.mark.parametrize("make", [bytearray, memoryview, lambda b: memoryview(bytearray(b))])
def test_bytes_like_inputs(k, make):
    records = random_records(8, n=20)
    converted = [(ts, None if key is None else make(key), None if v is None else make(v),
                  [(hk, None if hv is None else make(hv)) for hk, hv in h])
                 for ts, key, v, h in records]
    assert build(k, converted) == build(k, records)


def test_headers_any_iterable_of_pairs(k):
    rec = [(5, b"k", b"v", [("a", b"1"), ("b", None)])]
    expected = build(k, rec)
    for headers in (tuple(rec[0][3]), [list(p) for p in rec[0][3]], iter(rec[0][3]),
                    (p for p in rec[0][3])):
        assert build(k, [(5, b"k", b"v", headers)]) == expected
    plain = build(k, [(5, b"k", b"v", [])])
    for empty in ((), [], None, iter(())):
        assert build(k, [(5, b"k", b"v", empty)]) == plain
    b = k.RecordBatchBuilder(1000)
    assert b.append(5, b"k", b"v")
    assert b.build() == plain


def test_timestamp_none_is_now(k):
    b = k.RecordBatchBuilder(1000)
    before = int(time.time() * 1000)
    assert b.append(None, None, b"v")
    after = int(time.time() * 1000)
    batch = default_records.DefaultRecordBatch(b.build())
    assert before <= batch.first_timestamp <= after


def test_extreme_timestamps(k):
    records = [(2**63 - 1, None, b"a", []), (-2**63, None, b"b", []), (0, None, None, [])]
    data = build(k, records)
    batch = check_batch(data, records)
    assert batch.max_timestamp == 2**63 - 1


def test_empty_builder_builds_nothing(k):
    b = k.RecordBatchBuilder(100)
    assert len(b) == 0
    assert b.build() == b""
    with pytest.raises(IllegalStateError):
        b.build()


@pytest.mark.parametrize("codec", CODECS)
def test_first_record_always_fits(k, codec):
    big = b"x" * 5000
    b = k.RecordBatchBuilder(100, compression=codec)
    assert b.append(1, None, big)
    assert not b.append(1, None, b"")
    assert len(b) == 1
    check_batch(b.build(), [(1, None, big, [])], codec)
    b = k.RecordBatchBuilder(0, compression=codec)
    assert b.append(1, b"k", b"v")
    assert not b.append(2, None, None)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_room_is_the_uncompressed_size(k, codec):
    """hasRoomFor: header + records so far + the new record <= max_size, uncompressed."""
    one = len(build(k, [(7, None, b"v" * 50, [])]))
    rec_size = one - HEADER
    # equal-sized records: same timestamp, offset deltas 0..2 all one byte
    b = k.RecordBatchBuilder(HEADER + 3 * rec_size, compression=codec)
    assert all(b.append(7, None, b"v" * 50) for _ in range(3))
    assert not b.append(7, None, b"v" * 50)
    b = k.RecordBatchBuilder(HEADER + 3 * rec_size - 1, compression=codec)
    assert b.append(7, None, b"v" * 50) and b.append(7, None, b"v" * 50)
    assert not b.append(7, None, b"v" * 50)
    assert len(b) == 2


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_rejected_record_leaves_builder_unchanged(k, codec):
    records = random_records(9, n=8)
    reference = build(k, records, compression=codec)
    size = sum(len(build(k, [r])) - HEADER for r in records)  # rough: deltas differ a little
    b = k.RecordBatchBuilder(HEADER + size + 200, compression=codec)
    for r in records:
        assert b.append(*r)
    assert not b.append(records[0][0] + 5, b"key", b"x" * 10000, [("h", b"v")])
    assert not b.append(records[0][0], None, bytearray(10000))
    assert len(b) == len(records)
    assert b.build() == reference


def test_fill_with_tiny_records_until_full(k):
    b = k.RecordBatchBuilder(300)
    while b.append(1, None, b"x"):
        pass
    n = len(b)
    data = b.build()
    assert data == build(k, [(1, None, b"x", [])] * n)
    rec = len(build(k, [(1, None, b"x", [])] * 2)) - len(build(k, [(1, None, b"x", [])]))
    assert len(data) <= 300 < len(data) + rec


def test_record_length_varint_size_changes(both):
    """Records whose length prefix needs 1, 2, 3 bytes in every order."""
    sizes = [5, 200, 5, 20000, 5, 20000, 200, 60, 61, 62, 63, 64, 65, 8200, 3]
    records = [(i, None, bytes([i]) * n, []) for i, n in enumerate(sizes)]
    py, c = both
    data = build(c, records)
    assert data == build(py, records)
    check_batch(data, records)


def test_reentrant_header_iterators(both):
    """Iterators run Python code inside append(): nested appends and build() stay safe."""
    outs = []
    for impl in both:
        b = impl.RecordBatchBuilder(10000)

        def nested():
            yield ("a", b"1")
            assert b.append(2, None, b"inner", [("x", bytearray(b"y"))])
            yield ("b", None)
        assert b.append(1, b"k", b"outer", nested())
        outs.append(b.build())
        check_batch(outs[-1], [(2, None, b"inner", [("x", b"y")]),
                               (1, b"k", b"outer", [("a", b"1"), ("b", None)])])

        b = impl.RecordBatchBuilder(10000)
        assert b.append(1, None, b"v")

        def builds():
            yield ("a", b"1")
            b.build()
        with pytest.raises(IllegalStateError):
            b.append(2, None, b"w", builds())
    assert outs[0] == outs[1]


def test_append_and_build_after_build(k):
    b = k.RecordBatchBuilder(1000)
    assert b.append(1, None, b"v")
    b.build()
    with pytest.raises(IllegalStateError):
        b.append(2, None, b"v")
    with pytest.raises(IllegalStateError):
        b.build()
    assert len(b) == 1


@pytest.mark.parametrize("args", [
    (1.5, None, b"v"), ("1", None, b"v"), (1, "key", b"v"), (1, None, "value"),
    (1, 5, b"v"), (1, None, 3.0), (1, None, b"v", 5), (1, None, b"v", [(b"bytes-key", b"v")]),
    (1, None, b"v", [("k", "str-value")]), (1, None, b"v", [("k", 1)]), (1, None, b"v", [None]),
    (1, None, b"v", [(None, b"v")]), (1, None, memoryview(b"abcdef")[::2]),
    (1, memoryview(b"abcdef")[::2], None), (1, None, b"v", [("k", memoryview(b"abcd")[::2])]),
])
def test_bad_types(k, args):
    b = k.RecordBatchBuilder(1000)
    assert b.append(1, b"k", b"first")
    with pytest.raises(TypeError):
        b.append(*args)
    assert len(b) == 1
    assert b.build() == build(k, [(1, b"k", b"first", [])])


def test_bad_values(k):
    b = k.RecordBatchBuilder(1000)
    with pytest.raises(ValueError):
        b.append(2**63, None, b"v")
    with pytest.raises(ValueError):
        b.append(-2**63 - 1, None, b"v")
    with pytest.raises(ValueError):
        b.append(1, None, b"v", [("k", b"v", b"extra")])
    assert len(b) == 0
    with pytest.raises(UnicodeEncodeError):
        b.append(1, None, b"v", [("\ud800", b"v")])
    assert len(b) == 0


@pytest.mark.parametrize("kw", [
    dict(compression="snappy2"), dict(compression="GZIP"), dict(compression=1),
])
def test_unknown_codec(k, kw):
    with pytest.raises((UnsupportedCodecError, ValueError)):
        k.RecordBatchBuilder(1000, **kw)


@pytest.mark.parametrize("kw,exc", [
    (dict(max_size=-1), ValueError), (dict(max_size=1.0), TypeError),
    (dict(producer_id=2**63), ValueError), (dict(producer_epoch=2**15), ValueError),
    (dict(producer_epoch=-2**15 - 1), ValueError), (dict(base_sequence=2**31), ValueError),
    (dict(producer_id="1"), TypeError),
])
def test_bad_constructor_args(k, kw, exc):
    kw = {"max_size": 1000, **kw}
    with pytest.raises(exc):
        k.RecordBatchBuilder(**kw)


def test_huge_max_size(k):
    b = k.RecordBatchBuilder(2**80)
    assert b.append(1, None, b"v") and b.append(2, None, b"w")
    check_batch(b.build(), [(1, None, b"v", []), (2, None, b"w", [])])


def test_public_names(k):
    assert k.RECORD_BATCH_HEADER_SIZE == HEADER


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels disabled")
def test_cython_api(tmp_path):
    """The .pxd contract: attach caller memory, append_raw, seal, encode_headers."""
    pytest.importorskip("Cython")
    import importlib.util
    import os

    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    import kcore.record_batch_builder as rbb

    src = tmp_path / "rbb_capi.pyx"
    src.write_text('''
from libc.stdint cimport int32_t, uint8_t
from libc.stdlib cimport malloc, free
from kcore.record_batch_builder cimport RecordBatchBuilder, encode_headers, RBB_HEADER_SIZE

def run(int slab_size, list values, headers, codec="none", max_size=1 << 20):
    cdef RecordBatchBuilder b = RecordBatchBuilder(max_size, codec)
    cdef uint8_t* slab = <uint8_t*>malloc(slab_size)
    cdef int32_t hcount = 0
    cdef bytes h = encode_headers(headers, &hcount)
    cdef const uint8_t* hp = <const uint8_t*>(<char*>h)
    cdef Py_ssize_t hlen = len(h), vlen, n
    cdef const uint8_t* vp
    cdef bytes v
    cdef list rcs = []
    cdef int rc
    try:
        assert RecordBatchBuilder(100).attach(slab, RBB_HEADER_SIZE - 1) == -1
        assert b.attach(slab, slab_size) == 0
        for v in values:
            vp, vlen = <const uint8_t*>(<char*>v), len(v)
            with nogil:
                rc = b.append_raw(42, NULL, -1, vp, vlen, hp, hlen, hcount)
            rcs.append(rc)
        assert b.attach(slab, slab_size) == -1   # not after appends
        in_slab = b.buf == slab
        with nogil:
            n = b.seal()
        if n < 0:                                 # compressed: build() under the GIL
            return rcs, in_slab, b.build(), n
        return rcs, in_slab, (<char*>b.buf)[:n], b.seal()
    finally:
        free(slab)
''')
    build_dir = tmp_path / "build"
    pkg_root = os.path.dirname(os.path.dirname(rbb.__file__))
    ext = Extension("rbb_capi", [str(src)])
    dist = Distribution({"ext_modules": cythonize([ext], include_path=[pkg_root], quiet=True,
                                                  compiler_directives={"language_level": 3})})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib = str(tmp_path)
    cmd.build_temp = str(build_dir)
    try:
        dist.run_command("build_ext")
    except Exception as e:  # no compiler: the rest of the suite covers the kernel
        pytest.skip("cannot compile the C API test module: %s" % e)
    spec = importlib.util.spec_from_file_location("rbb_capi", cmd.get_outputs()[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    headers = [("trace", b"abc"), ("é", None)]
    values = [b"a" * 100, b"b" * 200]
    expected = build(kcore.kernels(pure=True), [(42, None, v, headers) for v in values])
    expected_one = build(kcore.kernels(pure=True), [(42, None, values[0], headers)])
    rcs, in_slab, data, again = mod.run(4096, values, headers)
    assert rcs == [1, 1] and in_slab and again == -1
    assert data == expected
    # outgrowing the slab moves to malloc'd memory, same bytes
    rcs, in_slab, data, _ = mod.run(300, values, headers)
    assert rcs == [1, 1] and not in_slab and data == expected
    # max_size: the second record does not fit (RBB_FULL), the first always does
    rcs, in_slab, data, _ = mod.run(4096, values, headers, max_size=100)
    assert rcs == [1, 0] and in_slab and data == expected_one
    # compressed: seal() refuses, build() compresses what is in the slab
    rcs, in_slab, data, sealed = mod.run(4096, values, headers, codec="zstd")
    assert rcs == [1, 1] and in_slab and sealed == -1
    assert data == build(kcore.kernels(pure=True), [(42, None, v, headers) for v in values],
                         compression="zstd")
