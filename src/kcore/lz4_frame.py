"""The LZ4 frame of a compressed record batch (one module: both implementations compress through
kcore.compression_type, which is plain Python).

Kafka reads LZ4 frames with independent blocks (KIP-57) and no content checksum, as Java writes
them. The frame is written here around cramjam's block compressor, which runs without the GIL
(its streaming compressor holds it): one block per batch up to 4 MiB, the block size the
smallest of LZ4's four that holds the batch, fast mode as kafka-python and librdkafka.
cramjam is imported on first use.
"""
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks; no block or content checksum, no size
# (block size, its BD byte, the header checksum: byte 1 of xxh32(FLG, BD))
_LZ4_BLOCK_SIZES = ((1 << 16, 0x40, 0x82), (1 << 18, 0x50, 0xFB), (1 << 20, 0x60, 0x51),
                    (1 << 22, 0x70, 0x73))
_LZ4_UNCOMPRESSED = 0x80000000  # block size flag: the block is stored as it is


def lz4_frame(data):
    """data (bytes-like) as one LZ4 frame (bytes)."""
    import cramjam
    view = memoryview(data).cast("B")
    n = view.nbytes
    for block, bd, hc in _LZ4_BLOCK_SIZES:
        if n <= block:
            break
    parts = [_LZ4_MAGIC, bytes((_LZ4_FLG, bd, hc))]
    compress_block = cramjam.lz4.compress_block
    for i in range(0, n, block):
        raw = view[i:i + block]
        packed = compress_block(raw, store_size=False)
        size = len(packed)
        if size >= len(raw):
            parts.append((len(raw) | _LZ4_UNCOMPRESSED).to_bytes(4, "little"))
            parts.append(raw)
        else:
            parts.append(size.to_bytes(4, "little"))
            parts.append(packed)
    parts.append(b"\0\0\0\0")  # end mark
    return b"".join(parts)
