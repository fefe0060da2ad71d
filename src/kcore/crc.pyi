"""The contract of kcore.crc and its twin kcore.pure.crc: CRC32C (Castagnoli)."""
from typing_extensions import Buffer

__all__ = ["crc32c", "crc32c_backend"]

def crc32c(data: Buffer, crc: int = 0) -> int: ...
def crc32c_backend() -> str: ...
