"""An uncompressed batch is sealed in its BufferPool memory and sent from there (MemoryRecords,
the compiled build; the twin's payload is bytes): the same bytes as a copy, the memory back in
the pool when the batch completes and no view of it is left."""
import gc

import pytest

from test_batch_growth import _paths, _send, _values, _drain_all


def _drained(k, n=50, **configs):
    acc, sp, _ = _paths(k, batch_size=4096, **configs)
    futures = _send(sp, n)
    return acc, futures, _drain_all(acc)


def test_payload_bytes_match_the_twin(both):
    payloads = []
    for impl in both:
        _, _, batches = _drained(impl)
        payloads.append([bytes(b.payload) for b in batches])
    assert payloads[0] == payloads[1]


def test_payload_is_the_pool_memory_until_completion(k):
    acc, futures, batches = _drained(k)
    pool = acc.pool
    held = pool.total_memory - pool.available_memory
    assert held >= len(batches) * 4096  # building copied nothing out of the pool
    assert _values(batches) == [b"%06d" % i + b"v" * 100 for i in range(50)]
    for i, batch in enumerate(batches):
        acc.complete(batch, base_offset=i)
    assert pool.available_memory == pool.total_memory
    if not k.pure:
        with pytest.raises(BufferError):
            memoryview(batches[0].payload)


def test_a_view_in_use_keeps_the_memory_past_completion(k):
    acc, _, batches = _drained(k)
    pool = acc.pool
    view = memoryview(batches[0].payload)  # e.g. a request still being written
    first = bytes(view[:61])
    for batch in batches:
        acc.complete(batch)
    if not k.pure:
        assert pool.available_memory < pool.total_memory
        assert bytes(view[:61]) == first  # still readable: not given back
    view.release()
    gc.collect()
    assert pool.available_memory == pool.total_memory


def test_compressed_batches_give_the_pool_memory_back_when_built(k):
    acc, _, batches = _drained(k, compression_type="lz4")
    assert all(isinstance(b.payload, bytes) for b in batches)
    assert acc.pool.available_memory == acc.pool.total_memory  # before completion
    assert _values(batches) == [b"%06d" % i + b"v" * 100 for i in range(50)]
    for batch in batches:
        acc.complete(batch)
    assert acc.pool.available_memory == acc.pool.total_memory


def test_restamp_copies_and_gives_the_memory_back(k):
    acc, _, batches = _drained(k, n=5)
    batch = batches[0]
    before = bytes(batch.payload)
    batch.build(7, 1, 0)  # a producer id after the first attempt: new header and CRC
    after = bytes(batch.payload)
    assert after[61:] == before[61:] and after[43:51] == (7).to_bytes(8, "big")
    acc.complete(batch)
    assert acc.pool.available_memory == acc.pool.total_memory
