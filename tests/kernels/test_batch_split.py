"""ProducerBatch.split and RecordAccumulator.split_and_reenqueue (MESSAGE_TOO_LARGE) on both
implementations: the halves hold the records in order (read by kafka-python's decoder), keep
the producer state and sequences, and each record's future reads its piece's outcome."""
import pytest
from kafka.record import MemoryRecords

from pyprod import config
from pyprod.errors import MessageSizeTooLargeError
from pyprod.producer import send_settings

from test_record_accumulator import FakeMetadata, _drain_all, accumulator


def _decoded(batch):
    recs = MemoryRecords(bytes(batch.payload))
    out = []
    while recs.has_next():
        b = recs.next_batch()
        for r in b:
            out.append((r.timestamp, r.key, r.value, [(hk, hv) for hk, hv in r.headers]))
    return out


def _state(batch):
    b = MemoryRecords(bytes(batch.payload)).next_batch()
    return b.producer_id, b.producer_epoch, b.base_sequence


def _setup(k, n, compression):
    cfg = config.build(batch_size=1 << 20, compression_type=compression, linger_ms=0)
    acc = accumulator(k, cfg, FakeMetadata(), seed=1)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **send_settings(cfg))
    futures = [sp.send("t", b"value-%d" % i * (i % 7), key=None if i % 3 else b"k%d" % i,
                       headers=[("h\u00e9", b"%d" % i), ("nul", None)] if i % 4 == 0 else None,
                       partition=2, timestamp_ms=1_700_000_000_000 + i * 3)
               for i in range(n)]
    (batch,) = _drain_all(acc)
    return acc, batch, futures


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_split_halves_keep_records_in_order(k, compression):
    acc, batch, futures = _setup(k, 41, compression)
    whole = _decoded(batch)
    halves = acc.split_and_reenqueue(batch)
    assert [h.record_count for h in halves] == [20, 21]
    assert _decoded(halves[0]) + _decoded(halves[1]) == whole
    assert all(h.created_ms == batch.created_ms for h in halves)
    assert _drain_all(acc) == halves  # back at the head of the deque, first half first
    acc.complete(halves[1], base_offset=500)
    assert not futures[0].is_done
    acc.complete(halves[0], base_offset=100)
    assert not any(f.is_done for f in futures)  # the parent completes when the Sender says
    acc.complete(batch)
    offsets = [f.get(0).offset for f in futures]
    assert offsets == list(range(100, 120)) + list(range(500, 521))
    assert futures[40].get(0).timestamp == 1_700_000_000_000 + 40 * 3


def test_split_keeps_producer_state_and_sequences(k):
    acc, batch, _ = _setup(k, 9, "lz4")
    batch.build(4242, 3, 1000)
    halves = batch.split(1 << 20, "lz4")
    assert [_state(h) for h in halves] == [(4242, 3, 1000), (4242, 3, 1004)]
    assert [h.base_sequence for h in halves] == [1000, 1004]
    assert all(h.sequence_epoch == (4242, 3) for h in halves)


def test_nested_split_and_record_errors(k):
    acc, batch, futures = _setup(k, 8, None)
    left, right = acc.split_and_reenqueue(batch)
    ll, lr = acc.split_and_reenqueue(left)
    acc.complete(ll, base_offset=10)
    acc.complete(lr, error=MessageSizeTooLargeError("too big"))
    acc.complete(left, record_errors=k.piece_errors(left.result.pieces))
    acc.complete(right, base_offset=40)
    errs = k.piece_errors(batch.result.pieces)
    assert sorted(errs) == [2, 3]
    acc.complete(batch, record_errors=errs)
    assert [f.get(0).offset for f in futures[:2]] == [10, 11]
    assert all(isinstance(f.exception, MessageSizeTooLargeError) for f in futures[2:4])
    assert [f.get(0).offset for f in futures[4:]] == [40, 41, 42, 43]
