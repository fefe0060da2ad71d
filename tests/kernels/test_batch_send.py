"""The batch_send kernel (BatchSendPath.send) on both implementations, without a network: the
records land in the accumulator's batches as send() would put them, Arrow and Python inputs
give the same bytes, and the one future reports per record index."""
import random
import time

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as java_murmur2
from kafka.record import MemoryRecords

from pyprod import config
from pyprod.errors import (BatchDeliveryError, IllegalStateError, InvalidRecordError,
                           KafkaError, KafkaTimeoutError, MessageSizeTooLargeError)
from pyprod.producer import send_settings

from test_record_accumulator import FakeMetadata, _drain_all, accumulator

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TS0 = 1_700_000_000_000


def _paths(k, partitions=6, **configs):
    cfg = config.build(**configs)
    meta = FakeMetadata(partitions)
    acc = accumulator(k, cfg, meta)
    wakeups = []
    sp = k.SendPath(acc, lambda *a: None, lambda: wakeups.append(1), **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, lambda: wakeups.append(1),
                         **send_settings(cfg))
    return acc, sp, bp, wakeups


def _complete(acc, batches, error=None):
    for b in batches:
        acc.complete(b, base_offset=0, error=error)


def _records(batches):
    """{partition: [(key, value, headers, timestamp)]} decoded by kafka-python."""
    out = {}
    for b in sorted(batches, key=lambda b: b.topic_partition.partition):
        recs = MemoryRecords(bytes(b.payload))
        while recs.has_next():
            for r in recs.next_batch():
                out.setdefault(b.topic_partition.partition, []).append(
                    (r.key, r.value, [(hk, hv) for hk, hv in r.headers], r.timestamp))
    return out


def _payloads(batches):
    return sorted((b.topic_partition.partition, bytes(b.payload)) for b in batches)


def _rows(n, seed=1):
    rng = random.Random(seed)
    keys = [None if i % 4 == 0 else b"key-%d" % rng.randrange(30) for i in range(n)]
    values = [None if i % 13 == 5 else rng.randbytes(rng.choice([0, 3, 100, 700]))
              for i in range(n)]
    headers = [None if i % 3 else [("h\u00e9", b"%d" % i), ("nul", None)] for i in range(n)]
    parts = [i % 6 if keys[i] is None else None for i in range(n)]
    stamps = [TS0 + rng.randrange(10**6) for _ in range(n)]
    return keys, values, headers, parts, stamps


def _arrow_headers(headers):
    return pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                     for h in headers], HEADERS)


def _chunked(values, typ, cut):
    return pa.chunked_array([pa.array(values[:cut], typ), pa.array(values[cut:], typ)], typ)


def _inputs(keys, values, headers, parts, stamps):
    """The same records in several input forms."""
    n = len(values)
    yield "lists", dict(values=values, keys=keys, headers=headers, partitions=parts,
                        timestamps=stamps)
    yield "arrow", dict(values=pa.array(values, pa.binary()), keys=pa.array(keys, pa.binary()),
                        headers=_arrow_headers(headers), partitions=pa.array(parts, pa.int32()),
                        timestamps=pa.array(stamps, pa.timestamp("ms")))
    yield "large+chunked", dict(
        values=_chunked(values, pa.large_binary(), n // 3),
        keys=_chunked(keys, pa.binary(), n // 2), headers=_arrow_headers(headers),
        partitions=_chunked(parts, pa.uint8(), 7),
        timestamps=pa.array([t * 1000 for t in stamps], pa.timestamp("us")))
    pad = [b"pad"] * 5
    yield "sliced", dict(
        values=pa.array(pad + values, pa.binary()).slice(5),
        keys=pa.array(pad + keys, pa.large_binary()).slice(5),
        headers=_arrow_headers([[("x", b"y")]] * 5 + headers).slice(5),
        partitions=pa.array([0] * 5 + parts, pa.int64()).slice(5),
        timestamps=pa.array([0] * 5 + stamps, pa.int64()).slice(5))
    big = pa.large_list(pa.struct([("key", pa.large_string()), ("value", pa.large_binary())]))
    yield "chunked large headers", dict(
        values=pa.array(values, pa.binary()), keys=pa.array(keys, pa.binary()),
        headers=pa.chunked_array([_arrow_headers(headers[:n // 2]).cast(big),
                                  _arrow_headers(headers[n // 2:]).cast(big)]),
        partitions=pa.chunked_array([pa.array(parts[:10], pa.int64()),
                                     pa.array(parts[10:], pa.int64())]),
        timestamps=_chunked(stamps, pa.int64(), n - 1))
    yield "mixed", dict(values=pa.array(values, pa.binary()), keys=keys,
                        headers=headers, partitions=parts, timestamps=pa.array(stamps))


def test_every_input_form_gives_the_same_bytes_in_both(both):
    keys, values, headers, parts, stamps = _rows(3000)
    seen = {}
    for k in both:
        for name, kwargs in _inputs(keys, values, headers, parts, stamps):
            acc, sp, bp, _ = _paths(k, batch_size=4096)
            future = bp.send("t", **kwargs)
            batches = _drain_all(acc)
            seen[(k.pure, name)] = _payloads(batches)
            _complete(acc, batches)
            md = future.get(0)
            assert md.record_count == 3000 and sum(md.partition_counts.values()) == 3000
    first = next(iter(seen.values()))
    for key, payloads in seen.items():
        assert payloads == first, key


def test_same_records_as_send_in_a_loop(both):
    keys, values, headers, parts, stamps = _rows(2000, seed=3)
    for k in both:
        acc, sp, bp, _ = _paths(k, batch_size=2048, compression_type="lz4")
        for i in range(len(values)):
            if values[i] is None and keys[i] is None:
                continue
            sp.send("t", values[i], keys[i], headers[i], parts[i], stamps[i])
        expect = _records(_drain_all(acc))
        acc, sp, bp, _ = _paths(k, batch_size=2048, compression_type="lz4")
        keep = [i for i in range(len(values)) if values[i] is not None or keys[i] is not None]
        bp.send("t", [values[i] for i in keep], keys=[keys[i] for i in keep],
                headers=[headers[i] for i in keep], partitions=[parts[i] for i in keep],
                timestamps=[stamps[i] for i in keep])
        got = _records(_drain_all(acc))
        assert got == expect
        assert sum(len(rs) for rs in got.values()) == len(keep)


def test_decoded_records(k):
    keys, values, headers, parts, stamps = _rows(500, seed=4)
    acc, sp, bp, _ = _paths(k)
    bp.send("t", pa.array(values), keys=pa.array(keys), headers=_arrow_headers(headers),
            partitions=pa.array(parts), timestamps=pa.array(stamps))
    got = _records(_drain_all(acc))
    per_part = {}
    for i in range(500):
        p = parts[i] if parts[i] is not None else (java_murmur2(keys[i]) & 0x7fffffff) % 6
        per_part.setdefault(p, []).append((keys[i], values[i], headers[i] or [], stamps[i]))
    assert got == per_part


def test_strings_are_utf8_bytes(both):
    words = ["h\u00e9llo", "", None, "\u4e2d\u6587"] * 50
    expect = None
    for k in both:
        for vals, ks in ((words, words), (pa.array(words, pa.string()),
                                          pa.array(words, pa.large_string())),
                         ([None if w is None else w.encode() for w in words],
                          pa.array([None if w is None else w.encode() for w in words]))):
            acc, sp, bp, _ = _paths(k)
            bp.send("t", vals, keys=ks, timestamps=[TS0] * len(words),
                    partitions=[None if w else 4 for w in words])  # not sticky
            got = _payloads(_drain_all(acc))
            expect = expect or got
            assert got == expect


def test_keyed_rows_use_java_murmur2_and_keyless_rows_stick(k):
    acc, sp, bp, _ = _paths(k, batch_size=1024)
    keys = [b"user-%d" % i for i in range(600)]
    f1 = bp.send("t", [b"v"] * 600, keys=keys)
    f2 = bp.send("t", pa.array([b"x" * 100] * 3000))
    batches = _drain_all(acc)
    got = _records(batches)
    for p, recs in got.items():
        for key, value, _, _ in recs:
            if key is not None:
                assert p == (java_murmur2(key) & 0x7fffffff) % 6
    _complete(acc, batches)
    assert sum(f1.get(0).partition_counts.values()) == 600
    counts = f2.get(0).partition_counts
    assert set(counts) == set(range(6))  # the sticky partition moves on as batches fill
    assert all(c >= 9 for c in counts.values())  # ... after a batch's worth (9 records)


def test_sticky_partition_is_shared_with_send(k):
    acc, sp, bp, _ = _paths(k, batch_size=100_000)
    first = sp.send("t", b"a")
    bp.send("t", [b"b"] * 10)
    last = sp.send("t", b"c")
    (batch,) = _drain_all(acc)
    acc.complete(batch, base_offset=10)
    assert first.get(0).offset == 10 and last.get(0).offset == 21


def test_interleaved_with_send_offsets_and_counts(k):
    acc, sp, bp, _ = _paths(k)
    a = sp.send("t", b"a", partition=2)
    fut = bp.send("t", [b"x", b"y", b"z"], partitions=[2, 3, 2])
    b = sp.send("t", b"b", partition=2)
    batches = _drain_all(acc)
    assert not fut.is_done
    assert [r[1] for r in _records(batches)[2]] == [b"a", b"x", b"z", b"b"]
    _complete(acc, batches)  # (the payloads' pool memory is gone after this)
    assert fut.get(0).partition_counts == {2: 2, 3: 1}
    assert a.get(0).offset == 0 and b.get(0).offset == 3


def test_too_large_records_fail_by_index_and_the_rest_go(k):
    acc, sp, bp, _ = _paths(k, max_request_size=2000)
    values = [b"a", b"b" * 3000, b"c", b"d" * 5000, b"e"]
    fut = bp.send("t", pa.array(values), partitions=[0, 0, 1, 1, 0])
    batches = _drain_all(acc)
    assert sum(b.record_count for b in batches) == 3
    _complete(acc, batches)
    with pytest.raises(BatchDeliveryError) as info:
        fut.get(0)
    e = info.value
    assert [i for i, _ in e.failures] == [1, 3]
    assert all(isinstance(x, MessageSizeTooLargeError) for _, x in e.failures)
    assert (e.failed_count, e.succeeded_count) == (2, 3)


def test_failed_batches_map_back_to_record_indices(k):
    acc, sp, bp, _ = _paths(k, batch_size=300)
    n = 400
    keys = [b"k%d" % (i % 17) for i in range(n)]
    fut = bp.send("t", [b"%05d" % i for i in range(n)], keys=keys)
    batches = _drain_all(acc)
    boom = KafkaTimeoutError("expired")
    failed = set()
    for j, b in enumerate(batches):
        if j % 3 == 0:
            failed.update(int(r[1]) for r in _records([b])[b.topic_partition.partition])
            acc.complete(b, error=boom)
        elif j % 3 == 1:
            acc.complete(b, base_offset=0)
        else:  # only the second record of the batch failed (the broker's record_errors)
            first = _records([b])[b.topic_partition.partition]
            b.done(0, -1, None, {1: InvalidRecordError("bad")})
            acc.complete(b)
            if len(first) > 1:
                failed.add(int(first[1][1]))
    e = fut.exception
    assert isinstance(e, BatchDeliveryError)
    assert [i for i, _ in e.failures] == sorted(failed)
    assert all(isinstance(x, (KafkaTimeoutError, InvalidRecordError)) for _, x in e.failures)
    assert e.succeeded_count == n - len(failed)


def test_future_completes_after_every_batch(k):
    acc, sp, bp, _ = _paths(k, batch_size=512, batch_max_size=512)  # batches never grow
    fut = bp.send("t", [b"x" * 50] * 100, partitions=[i % 2 for i in range(100)])
    calls = []
    fut.add_both(calls.append)
    batches = _drain_all(acc)
    assert len(batches) > 2
    assert len(acc.incomplete_results()) == len(batches)  # flush() waits for them
    _complete(acc, batches[:-1])
    assert not fut.is_done and not calls
    _complete(acc, batches[-1:])
    assert fut.succeeded() and calls == [fut.value]


@pytest.mark.parametrize("bad, error", [
    (dict(values=[b"a", 1]), TypeError),
    (dict(values=b"abc"), TypeError),
    (dict(values=[b"a", b"b"], keys=[b"k"]), ValueError),
    (dict(values=[b"a"], headers=[[("k", 1)]]), TypeError),
    (dict(values=[b"a"], headers=[[(1, b"v")]]), TypeError),
    (dict(values=[b"a"], partitions=[-1]), ValueError),
    (dict(values=[b"a"], partitions=["1"]), TypeError),
    (dict(values=[b"a"], timestamps=[-5]), ValueError),
    (dict(values=pa.array([1, 2])), TypeError),
    (dict(values=pa.array([b"a"]), keys=pa.array([1.5])), TypeError),
    (dict(values=pa.array([b"a"]), partitions=pa.array(["x"])), TypeError),
    (dict(values=pa.array([b"a"]), partitions=pa.array([-2])), ValueError),
    (dict(values=pa.array([b"a"]), timestamps=pa.array([1.0])), TypeError),
    (dict(values=pa.array([b"a"]), timestamps=pa.array([-1], pa.timestamp("ns"))), ValueError),
    (dict(values=pa.array([b"a"]), headers=pa.array([[1]])), TypeError),
    (dict(values=pa.array([b"a"]), headers=pa.array([[{"key": None, "value": b"v"}]],
                                                    HEADERS)), ValueError),
    (dict(values=pa.array([b"a", b"b"]), keys=pa.array([b"a"])), ValueError),
], ids=lambda x: "" if isinstance(x, dict) else x.__name__)
def test_bad_input_is_refused_before_anything_is_sent(k, bad, error):
    acc, sp, bp, _ = _paths(k)
    with pytest.raises(error):
        bp.send("t", **bad)
    assert not acc.has_undrained()


def test_closed_and_bad_topic(k):
    acc, sp, bp, _ = _paths(k)
    with pytest.raises(TypeError):
        bp.send(b"t", [b"a"])
    sp.closed = True
    with pytest.raises(IllegalStateError):
        bp.send("t", [b"a"])


def test_full_buffer_times_out_and_says_how_many_were_appended(k):
    acc, sp, bp, _ = _paths(k, batch_size=1024, buffer_memory=4096, max_block_ms=50)
    with pytest.raises(KafkaTimeoutError, match=r"\d+ of 100 records were appended"):
        bp.send("t", [b"x" * 500] * 100, partitions=[i % 6 for i in range(100)])
    batches = _drain_all(acc)
    assert batches and not any(b.appending for b in batches)
    _complete(acc, batches)


def test_unknown_topic_times_out(k):
    acc, sp, bp, _ = _paths(k)
    with pytest.raises(KafkaTimeoutError):
        bp.send("other", [b"v"])


def test_timestamps_units_and_now(k):
    acc, sp, bp, _ = _paths(k)
    before = int(time.time() * 1000)
    bp.send("t", [b"a", b"b", b"c", b"d", b"e"], partitions=[0] * 5,
            timestamps=[TS0, None, TS0 + 1, None, TS0 + 2])
    bp.send("t", [b"s", b"ms", b"us", b"ns"], partitions=[1] * 4, timestamps=None)
    for unit, scale in (("s", 1), ("ms", 1000), ("us", 10**6), ("ns", 10**9)):
        bp.send("t", [unit.encode()], partitions=[2],
                timestamps=pa.array([1_700_000_000 * scale + 7 * scale // 1000],
                                    pa.timestamp(unit)))
    after = int(time.time() * 1000)
    got = _records(_drain_all(acc))
    ts = [r[3] for r in got[0]]
    assert ts[0] == TS0 and ts[2] == TS0 + 1 and ts[4] == TS0 + 2
    assert before <= ts[1] <= after and before <= ts[3] <= after
    assert all(before <= r[3] <= after for r in got[1])
    assert [r[3] for r in got[2]] == [1_700_000_000_000, 1_700_000_000_007,
                                      1_700_000_000_007, 1_700_000_000_007]


def test_serializers_apply_to_python_values_only(k):
    acc, sp, bp, _ = _paths(k, value_serializer=None)
    bp.value_serializer = lambda topic, headers, v: ("<%s>" % v).encode()
    bp.key_serializer = lambda topic, headers, v: v.upper()
    bp.send("t", ["a", None], keys=[b"k", b"k"], partitions=[0, 0])
    bp.send("t", pa.array(["b"]), keys=pa.array([b"k"]), partitions=[0])
    recs = [r for rs in _records(_drain_all(acc)).values() for r in rs]
    assert [(r[0], r[1]) for r in recs] == [(b"K", b"<a>"), (b"K", None), (b"k", b"b")]


def test_empty_call(k):
    acc, sp, bp, _ = _paths(k)
    assert bp.send("nowhere", []).get(0).record_count == 0
    assert bp.send("t", pa.array([], pa.binary())).get(0).partition_counts == {}


def test_aborted_batches_fail_the_call(k):
    acc, sp, bp, _ = _paths(k)
    fut = bp.send("t", [b"a"] * 10)
    acc.abort_incomplete(KafkaError("Producer is closed forcefully."))
    assert fut.failed() and fut.exception.failed_count == 10


def test_a_batch_another_writer_holds_is_left_alone(k):
    acc, sp, bp, _ = _paths(k)
    sp.send("t", b"a", partition=0)
    dq = acc.topic_info("t").deques[0]
    held = dq[-1]
    held.appending = True  # as send_batch marks the batches it fills
    sp.send("t", b"b", partition=0)  # not into the held batch: a new one
    assert len(dq) == 2 and dq[0] is held and held.record_count == 1
    assert acc.expired_batches(1 << 62) == []  # the queue waits behind the held batch
    acc.begin_flush()
    assert acc.drain(FakeMetadata().cluster, {0}, 1 << 20, 10**12) == {0: []}
    held.appending = False
    assert len(_drain_all(acc)) == 2


def test_a_sender_draining_at_every_wakeup_never_takes_a_held_batch(k):
    """wakeup() may hand the GIL to the Sender thread, which drains what it can: here it
    drains right inside each wakeup, so a batch not yet marked as held would be taken."""
    cfg = config.build(batch_size=1024, linger_ms=0)
    acc = accumulator(k, cfg, FakeMetadata())
    drained = []

    def wakeup():
        for batches in acc.drain(FakeMetadata().cluster, {0}, 1 << 20, 10**12).values():
            drained.extend(batches)

    sp = k.SendPath(acc, lambda *a: None, wakeup, **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, wakeup, **send_settings(cfg))
    values = [b"%06d" % i for i in range(3000)]
    fut = bp.send("t", pa.array(values), partitions=pa.array([i % 3 for i in range(3000)]))
    drained.extend(_drain_all(acc))
    got = _records(drained)
    assert sorted(r[1] for rs in got.values() for r in rs) == values
    for p, rs in got.items():
        assert [r[1] for r in rs] == sorted(r[1] for r in rs)  # in order within a partition
    _complete(acc, drained)
    assert fut.get(0).partition_counts == {0: 1000, 1: 1000, 2: 1000}
