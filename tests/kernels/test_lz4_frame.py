"""The LZ4 frame of a compressed batch (kcore/_compression_type.py, both implementations):
independent blocks, no checksums, the smallest block size that holds the batch; the reference
LZ4 frame decoders and kafka-python read it back."""
import os

import cramjam
import pytest
from kafka.record import MemoryRecords

from kcore.compression_type import lz4_frame

# the reference decoder; lz4 publishes no free-threaded (cp314t) wheel
lz4_frame_ref = pytest.importorskip("lz4.frame")

SIZES = [0, 1, 1000, 65536, 65537, 1 << 18, (1 << 20) + 3, 5 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_reference_decoders_read_it(size):
    data = (b"kafka " * (size // 6 + 1))[:size]
    for payload in (data, os.urandom(size)):  # compressible, and stored as it is
        frame = lz4_frame(payload)
        assert lz4_frame_ref.decompress(frame) == payload
        assert bytes(cramjam.lz4.decompress(frame)) == payload
        assert lz4_frame(memoryview(payload)) == frame


@pytest.mark.parametrize("size, bd", [(100, 0x40), (65536, 0x40), (65537, 0x50),
                                      (1 << 18, 0x50), (1 << 20, 0x60), (5 << 20, 0x70)])
def test_header_independent_blocks_of_the_smallest_size(size, bd):
    frame = lz4_frame(b"x" * size)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60 and frame[5] == bd  # independent blocks, no checksums
    info = lz4_frame_ref.get_frame_info(frame)
    assert info["block_linked"] is False and info["content_checksum"] is False


def test_incompressible_block_is_stored_raw():
    data = os.urandom(4096)
    frame = lz4_frame(data)
    size = int.from_bytes(frame[7:11], "little")
    assert size == 0x80000000 | 4096 and frame[11:11 + 4096] == data


def test_batches_read_back_by_kafka_python(k):
    builder = k.RecordBatchBuilder(1 << 20, "lz4")
    values = [os.urandom(50) + b"v" * i for i in range(300)]
    for i, value in enumerate(values):
        assert builder.append(1_700_000_000_000 + i, b"k%d" % i, value)
    records = MemoryRecords(bytes(builder.build()))
    batch = records.next_batch()
    assert batch.compression_type == 3
    assert [r.value for r in batch] == values
