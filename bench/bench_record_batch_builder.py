"""Record batch v2 building: full 16 KiB batches of 100-byte values (null key, no headers),
build() included. Peers: aiokafka's Cython DefaultRecordBatchBuilder and kafka-python's builder.
records/s in extra_info; the ratios to kcore's compiled builder are printed at the end.

    python -m pytest bench/bench_record_batch_builder.py --benchmark-enable
"""
import random
from types import SimpleNamespace

import cramjam
import pytest

import kcore
from _report import write_report  # bench/ is on sys.path for its modules

BATCH = 16384
TS = 1_700_000_000_000
_rng = random.Random(100)
# 100-byte ASCII values, about as compressible as hex text (LZ4 gains little; that is fine)
VALUES = [_rng.randbytes(50).hex().encode() for _ in range(400)]
CODEC_IDS = {"none": 0, "lz4": 3}
_results = {}


def _lz4_fast(data):
    c = cramjam.lz4.Compressor(level=0, block_linked=False, content_checksum=False)
    c.compress(bytes(data))
    return bytes(c.finish())


def kcore_filler(impl):
    builder = impl.RecordBatchBuilder

    def fill(codec):
        b = builder(BATCH, codec)
        append = b.append
        for v in VALUES:
            if not append(TS, None, v):
                break
        b.build()
        return len(b)
    return fill


def legacy_filler(builder_cls):
    """aiokafka / kafka-python: append(offset, ts, key, value, headers) -> None when full."""
    def fill(codec):
        b = builder_cls(2, CODEC_IDS[codec], False, -1, -1, -1, BATCH)
        append = b.append
        headers = []
        n = 0
        for v in VALUES:
            if append(n, TS, None, v, headers) is None:
                break
            n += 1
        b.build()
        return n
    return fill


def _aiokafka():
    mod = pytest.importorskip("aiokafka.record._crecords.default_records")
    return legacy_filler(mod.DefaultRecordBatchBuilder)


def _kafka_python():
    mod = pytest.importorskip("kafka.record.default_records")
    return legacy_filler(mod.DefaultRecordBatchBuilder)


IMPLS = {
    "kcore-c": lambda: kcore_filler(kcore.kernels(pure=False)),
    "kcore-pure": lambda: kcore_filler(kcore.kernels(pure=True)),
    "aiokafka": _aiokafka,
    # aiokafka compresses LZ4 at HC level 9; this row swaps in the fast mode kcore uses
    "aiokafka-lz4fast": _aiokafka,
    "kafka-python": _kafka_python,
}


@pytest.fixture
def codec_patches(monkeypatch, request):
    impl = request.node.callspec.params["impl"]
    if impl == "kafka-python":  # its LZ4 needs the lz4 package: use cramjam, fast mode as lz4's
        import kafka.codec
        import kafka.record.default_records as kdr
        if not kafka.codec.has_lz4():
            monkeypatch.setattr(kafka.codec, "lz4", SimpleNamespace())
            monkeypatch.setattr(kdr, "lz4_encode", _lz4_fast)
    if impl == "aiokafka-lz4fast":
        mod = pytest.importorskip("aiokafka.record._crecords.default_records")
        monkeypatch.setattr(mod, "lz4_encode", _lz4_fast)


@pytest.fixture(scope="module", autouse=True)
def ratio_report(request):
    yield
    lines = []
    for codec in CODEC_IDS:
        base = _results.get((codec, "kcore-c"))
        if not base:
            continue
        lines.append("record batch builder, compression=%s: best records/s, kcore-c speedup"
                     % codec)
        lines += ["  %-18s %12.0f   %.2fx" % (impl, _results[codec, impl],
                                              base / _results[codec, impl])
                  for impl in IMPLS if _results.get((codec, impl))]
    write_report(request, lines)


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_build_16k_batches(benchmark, codec_patches, codec, impl):
    if impl == "aiokafka-lz4fast" and codec != "lz4":
        pytest.skip("same as aiokafka without compression")
    if impl == "kcore-c" and not kcore.EXTENSIONS:
        pytest.skip("compiled kernels disabled")
    fill = IMPLS[impl]()
    benchmark.group = "record batch 16KiB, 100B values, " + codec
    n = benchmark(fill, codec)
    assert 100 < n < len(VALUES)
    if benchmark.stats is not None:  # None under --benchmark-disable
        rate = n / benchmark.stats.stats.min
        benchmark.extra_info["records/s"] = round(rate)
        _results[(codec, impl)] = rate

