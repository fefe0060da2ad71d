"""Edges of send_batch's fast path (#44): varints at their one/two/three-byte boundaries
(written inline by the builder), numpy S columns read in place (trailing NULs dropped in the
walk, which stops and resumes mid-column at batch boundaries) and batches grown to
batch_max_size at once. Both twins write the same bytes; kafka-python decodes them."""
import numpy as np
import pytest

from test_batch_send import TS0, _complete, _drain_all, _paths, _payloads, _records

# one-byte zigzag varints end at 63 / -64, two-byte ones at 8191 / -8192
DELTAS = [0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, 1 << 40, -(1 << 40)]
# a record body (after its length) is 5 bytes + the value's length varint + the value, keyless
BODY_EDGES = [57, 58, 8184, 8185]  # bodies of 63, 64, 8191 and 8192 bytes


def _twins(both, send, **configs):
    """send(bp) on each twin (explicit timestamps: "now" differs between the two): their
    payloads (equal) and kafka-python's records."""
    out = []
    for k in both:
        acc, _, bp, _ = _paths(k, **configs)
        fut = send(bp)
        batches = _drain_all(acc)
        out.append((_payloads(batches), _records(batches)))
        _complete(acc, batches)
        assert fut.get(0).record_count > 0
        assert acc.pool.available_memory == acc.pool.total_memory
    assert out[0][0] == out[1][0]
    return out[0][1]


def test_varints_at_their_boundaries(both):
    values = [b"v" * n for n in BODY_EDGES] + [b"d%d" % i for i in range(len(DELTAS))]
    stamps = [TS0] * len(BODY_EDGES) + [TS0 + d for d in DELTAS]
    recs = _twins(both, lambda bp: bp.send("t", values, partitions=[2] * len(values),
                                           timestamps=stamps), batch_max_size=65536)
    assert [(r[1], r[3]) for r in recs[2]] == list(zip(values, stamps))


def test_offset_deltas_past_two_bytes(both):
    n = 8300  # offsetDelta 8192 is the first three-byte one
    recs = _twins(both, lambda bp: bp.send("t", [b""] * n, partitions=[0] * n,
                                           timestamps=[TS0] * n),
                  batch_size=1 << 20, batch_max_size=1 << 20)
    assert [r[1] for r in recs[0]] == [b""] * n


@pytest.mark.parametrize("width", [1, 7, 100])
def test_numpy_s_columns_across_batch_boundaries(both, width):
    n = 700
    raw = [(b"%d:" % i + b"\x00x" * width)[:width] for i in range(n)]
    raw = [v if i % 5 else v[:i % width] + b"\x00" * (width - i % width)  # trailing NULs
           for i, v in enumerate(raw)]
    values = np.array(raw, "S%d" % width)
    keys = np.array([b"k%d\x00" % (i % 11) if i % 3 else b"" for i in range(n)], "S6")
    parts = [i % 4 for i in range(n)]
    recs = _twins(both, lambda bp: bp.send("t", values[::-1], keys=keys[::-1],
                                           partitions=parts[::-1], timestamps=[TS0] * n),
                  batch_size=256, batch_max_size=1024)  # the walk stops every few records
    want = {}
    for v, kk, p in zip(raw[::-1], keys.tolist()[::-1], parts[::-1]):
        want.setdefault(p, []).append((kk, v.rstrip(b"\x00")))  # an S key is never null
    assert {p: [r[:2] for r in rs] for p, rs in recs.items()} == want


def test_send_batch_grows_a_batch_to_its_max_at_once(k):
    acc, sp, bp, _ = _paths(k, batch_size=1024, batch_max_size=16384)
    sp.send("t", b"x" * 500, partition=1)  # the open batch send_batch then takes and grows
    bp.send("t", [b"y" * 300] * 10, partitions=[1] * 10)  # 3.6 KB: past 1 KiB, under 4 KiB
    pool = acc.pool  # one buffer, of batch_max_size: not GROWTH times 1 KiB first
    assert pool.total_memory - pool.available_memory == 16384
    batches = _drain_all(acc)
    assert [len(r[1]) for r in _records(batches)[1]] == [500] + [300] * 10
    _complete(acc, batches)
    assert acc.pool.available_memory == acc.pool.total_memory
