"""The contract of kcore.murmur and its twin kcore.pure.murmur: Java's Utils.murmur2 and the
key -> partition rule."""
from typing_extensions import Buffer

__all__ = ["murmur2", "partition_for_key"]

def murmur2(data: Buffer) -> int: ...
def partition_for_key(key: Buffer, num_partitions: int) -> int: ...
