"""CompressionType: the record batch codecs, in one place (Java's CompressionType): the public
name of kcore/_compression_type.py's registry, from the implementation kcore runs (the
compiled builder compiles it in, so the Sender thread compresses without Python bytecode)."""
from kcore import EXTENSIONS

if EXTENSIONS:
    from kcore.record_batch_builder import (CODECS, GZIP, LZ4, NAMES, NONE, SNAPPY,  # noqa: F401
                                            TYPES, ZSTD, CompressionType, for_id, for_name,
                                            lz4_frame)
else:
    from kcore._compression_type import (CODECS, GZIP, LZ4, NAMES, NONE,  # noqa: F401
                                               SNAPPY, TYPES, ZSTD, CompressionType, for_id,
                                               for_name, lz4_frame)

__all__ = ["CompressionType", "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "TYPES", "NAMES",
           "CODECS", "for_name", "for_id", "lz4_frame"]
