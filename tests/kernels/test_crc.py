import importlib
import platform
import random
import threading
from array import array

import pytest

import kcore

crc32c_pkg = pytest.importorskip("crc32c")
reference = crc32c_pkg.crc32c

# lengths around the hardware path's block sizes (3 lanes of 8192, 1024 and 256 bytes)
EDGE_LENGTHS = [0, 1, 7, 8, 9, 15, 16, 63, 64, 255, 256, 767, 768, 769, 1535, 1536, 3071, 3072,
                3073, 3839, 3840, 24575, 24576, 24577, 24576 + 3072 + 768 + 13, 49152, 65536, 70001]


@pytest.fixture(scope="module")
def base():
    return random.Random(1).randbytes(80_000)


def random_slices(base, count, seed):
    """memoryview slices of base at odd offsets; lengths mostly short, some up to ~70k."""
    rng = random.Random(seed)
    for _ in range(count):
        cap = rng.choice((100, 4096, 70_000))
        n = rng.randrange(cap + 1)
        off = rng.randrange(len(base) - n + 1)
        yield memoryview(base)[off:off + n]


@pytest.mark.parametrize("data,expected", [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (b"123456789", 0xE3069283),
    (b"", 0),
    (b"\x00" * 1000, 0xD84DDA57),  # long enough for the pure twin's folding path
])
def test_known_vectors(k, data, expected):
    for buf in (data, bytearray(data), memoryview(data)):
        assert k.crc32c(buf) == expected


def test_random_buffers_match_crc32c_package(k, base):
    count = 4000
    for view in random_slices(base, count, seed=2):
        start = random.Random(len(view)).randrange(2 ** 32)
        assert k.crc32c(view) == reference(view), len(view)
        assert k.crc32c(view, start) == reference(view, start), len(view)


def test_edge_lengths_and_alignments(k, base):
    for n in EDGE_LENGTHS:
        for off in range(9):
            view = memoryview(base)[off:off + n]
            assert k.crc32c(view) == reference(view), (n, off)


def test_incremental_equals_one_shot(k, base):
    rng = random.Random(3)
    for view in random_slices(base, 300, seed=4):
        cuts = sorted(rng.randrange(len(view) + 1) for _ in range(rng.randrange(1, 6)))
        crc, prev = 0, 0
        for cut in cuts + [len(view)]:
            crc = k.crc32c(view[prev:cut], crc)
            prev = cut
        assert crc == k.crc32c(view) == reference(view)


def test_buffer_types(k):
    data = bytes(range(256)) * 5
    expected = reference(data)
    words = array("I")
    words.frombytes(data)
    for buf in (data, bytearray(data), memoryview(data), words, memoryview(words),
                memoryview(data).cast("B", (32, 40))):
        assert k.crc32c(buf) == expected


def test_bad_arguments(k):
    for bad in (None, "text", 12, [1, 2]):
        with pytest.raises(TypeError):
            k.crc32c(bad)
    with pytest.raises(BufferError):
        k.crc32c(memoryview(b"abcdef")[::2])
    for bad in (-1, 2 ** 32):
        with pytest.raises(OverflowError):
            k.crc32c(b"x", bad)
    for bad in (1.0, "1", None):
        with pytest.raises(TypeError):
            k.crc32c(b"x", bad)


def test_impls_identical(both, base):
    py, c = both
    for view in random_slices(base, 200, seed=5):
        assert py.crc32c(view) == c.crc32c(view)


def test_backend(k):
    if k.pure:
        assert k.crc32c_backend() == "python"
        return
    backend = k.crc32c_backend()
    assert backend in ("sse4.2", "armv8", "table")
    machine = platform.machine().lower()
    if crc32c_pkg.hardware_based and machine in ("x86_64", "amd64"):
        assert backend == "sse4.2"
    if crc32c_pkg.hardware_based and machine in ("aarch64", "arm64"):
        assert backend == "armv8"


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled module only")
def test_table_path_directly(base):
    table = importlib.import_module("kcore.crc")._crc32c_table
    assert table(bytes(32)) == 0x8A9136AA
    assert table(b"123456789") == 0xE3069283
    for n in EDGE_LENGTHS:
        view = memoryview(base)[3:3 + n]
        assert table(view) == reference(view), n
    for view in random_slices(base, 500, seed=6):
        assert table(view, 99) == reference(view, 99)


def test_threads_share_the_work(k, base):
    # large inputs run without the GIL in the compiled path; results must not interfere
    bufs = [memoryview(base)[i:] for i in range(4)]
    expected = [reference(b) for b in bufs]
    got = [None] * len(bufs)

    def work(i):
        for _ in range(20):
            got[i] = k.crc32c(bufs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(bufs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected
