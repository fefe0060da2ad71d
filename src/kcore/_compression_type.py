"""CompressionType: the record batch codecs, in one place (Java's CompressionType).

Each codec has its name (the compression_type value), its id (bits 0-2 of the batch
attributes), compress and decompress (the bytes Java writes and reads), and whether it is
available. Config validation, perf's choices, both RecordBatchBuilders and the split path
read this registry; adding a codec is adding one entry here.

cramjam is imported on a codec's first use, never at import: on free-threaded 3.13 the only
cramjam that installs turns the GIL on when imported, so a producer without compression must
not import it.

Both implementations run this code: the pure twin imports it (kcore.pure.record_batch_builder),
the compiled builder compiles it in (record_batch_builder.pyx includes it), so the Sender thread
compresses without running Python bytecode. Users and pyprod import kcore.compression_type.

The LZ4 frame: Kafka reads LZ4 frames with independent blocks (KIP-57) and no content checksum,
as Java writes them. It is written here around cramjam's block compressor, which runs without
the GIL (its streaming compressor holds it): one block per batch up to 4 MiB, the block size the
smallest of LZ4's four that holds the batch, fast mode as kafka-python and librdkafka.
"""
import importlib.util

from kcore.errors import UnsupportedCodecError

_SNAPPY_MAGIC = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"  # xerial, version 1 compat 1
_SNAPPY_CHUNK = 32768  # xerial block input size
_ZSTD_LEVEL = 3  # the Java client's default
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks; no block or content checksum, no size
# (block size, its BD byte, the header checksum: byte 1 of xxh32(FLG, BD))
_LZ4_BLOCK_SIZES = ((1 << 16, 0x40, 0x82), (1 << 18, 0x50, 0xFB), (1 << 20, 0x60, 0x51),
                    (1 << 22, 0x70, 0x73))
_LZ4_UNCOMPRESSED = 0x80000000  # block size flag: the block is stored as it is


class CompressionType:
    """One codec: name, attributes id, compress/decompress (bytes-like in, bytes-like out)."""

    __slots__ = ("name", "id", "_compress", "_decompress", "_module")

    def __init__(self, name, id, compress, decompress, module=None):
        self.name, self.id, self._module = name, id, module
        self._compress, self._decompress = compress, decompress

    @property
    def available(self):
        """Whether the library this codec needs is installed (checked without importing it)."""
        return self._module is None or importlib.util.find_spec(self._module) is not None

    def compress(self, data):
        """The records section data (bytes-like) as this codec writes it (bytes-like)."""
        return self._compress(data)

    def decompress(self, data):
        """What compress wrote (bytes-like) back as bytes."""
        return bytes(self._decompress(data))

    def __repr__(self):
        return "CompressionType(%r, %d)" % (self.name, self.id)


def _identity(data):
    return data


def _gzip(data):
    import cramjam
    return cramjam.gzip.compress(data)


def _gunzip(data):
    import cramjam
    return cramjam.gzip.decompress(data)


def _xerial_snappy(data):
    """Snappy in xerial framing, as Java writes it: magic, then [int32 length][raw block]
    per 32 KiB of input."""
    import cramjam
    compress_raw = cramjam.snappy.compress_raw
    parts = [_SNAPPY_MAGIC]
    for i in range(0, len(data), _SNAPPY_CHUNK):
        block = bytes(compress_raw(data[i:i + _SNAPPY_CHUNK]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return b"".join(parts)


def _xerial_unsnappy(data):
    import cramjam
    out, pos = [], len(_SNAPPY_MAGIC)
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos + 4:pos + 4 + n])))
        pos += 4 + n
    return b"".join(out)


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


def _unlz4(data):
    import cramjam
    return cramjam.lz4.decompress(data)


def _zstd(data):
    import cramjam
    return cramjam.zstd.compress(data, level=_ZSTD_LEVEL)


def _unzstd(data):
    import cramjam
    return cramjam.zstd.decompress(data)


NONE = CompressionType("none", 0, _identity, _identity)
GZIP = CompressionType("gzip", 1, _gzip, _gunzip, "cramjam")
SNAPPY = CompressionType("snappy", 2, _xerial_snappy, _xerial_unsnappy, "cramjam")
LZ4 = CompressionType("lz4", 3, lz4_frame, _unlz4, "cramjam")
ZSTD = CompressionType("zstd", 4, _zstd, _unzstd, "cramjam")

TYPES = (NONE, GZIP, SNAPPY, LZ4, ZSTD)  # in id order: TYPES[id] is the codec of that id
NAMES = tuple(t.name for t in TYPES)      # every accepted name, "none" first
CODECS = NAMES[1:]                        # the names that compress
_BY_NAME = {t.name: t for t in TYPES}


def for_name(compression):
    """The CompressionType named compression (None: NONE); UnsupportedCodecError otherwise."""
    if compression is None:
        return NONE
    codec = _BY_NAME.get(compression) if isinstance(compression, str) else None
    if codec is None:
        raise UnsupportedCodecError("unknown compression %r (expected one of %s)"
                                    % (compression, ", ".join(NAMES)))
    return codec


def for_id(codec_id):
    """The CompressionType of attributes codec bits codec_id; UnsupportedCodecError if none."""
    if 0 <= codec_id < len(TYPES):
        return TYPES[codec_id]
    raise UnsupportedCodecError("unknown compression codec id %d" % codec_id)
