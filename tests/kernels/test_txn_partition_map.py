"""TxnPartitionMap (the idempotent producer's sequence state) on both implementations, and
the compiled one with the pure twin's batches (the Sender unit tests mix them): sequences per
partition wrapping at 2**31, the in-flight limits, ordered retries, acknowledgements crossing,
resets (failed, bump_epoch, batches of unknown fate) and the OUT_OF_ORDER_SEQUENCE_NUMBER rule."""
import importlib
import importlib.machinery
import os
import types

import pytest

import kcore
from kcore.future import TopicPartition
from pyprod import config
from pyprod.producer import send_settings

from test_record_accumulator import FakeMetadata, accumulator

MOD = 1 << 31
PID, EPOCH = 1000, 3
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)

# (name, pure TxnPartitionMap, pure ProducerBatch)
IMPLS = [("python", True, True)] + \
    ([("c", False, False), ("c-tm-pure-batches", False, True)] if kcore.EXTENSIONS else [])


@pytest.fixture(params=IMPLS, ids=[i[0] for i in IMPLS])
def impl(request):
    _, tm_pure, batch_pure = request.param
    tm_mod = importlib.import_module(("kcore.pure." if tm_pure else "kcore.") +
                                     "txn_partition_map")
    return types.SimpleNamespace(TM=tm_mod.TxnPartitionMap, modulo=tm_mod.SEQUENCE_MODULO,
                                 k=kcore.kernels(pure=batch_pure))


def new_tm(impl, max_in_flight=5, pid=PID, epoch=EPOCH):
    tm = impl.TM(max_in_flight)
    if pid is not None:
        tm.set_producer_id(pid, epoch)
    return tm


def batch(impl, tp=TP0, records=1):
    b = impl.k.ProducerBatch(tp, 1024, None, 0)
    for _ in range(records):
        assert b.try_append(0, None, b"v", None, 0, 20) is not None
    return b


def stamped(impl, seq, records=1, tp=TP0, pid=PID, epoch=EPOCH):
    """A batch that holds sequences seq.. under (pid, epoch) (a retry)."""
    b = batch(impl, tp, records)
    b.build(pid, epoch, seq)
    return b


def header(b):
    """(producer id, epoch, base sequence) in the batch's bytes."""
    p = bytes(b.payload)
    return (int.from_bytes(p[43:51], "big", signed=True),
            int.from_bytes(p[51:53], "big", signed=True),
            int.from_bytes(p[53:57], "big", signed=True))


def test_compiled_loaded_unless_disabled():
    assert kcore.SEQUENCE_MODULO == MOD
    mod = importlib.import_module(kcore.TxnPartitionMap.__module__)
    if os.environ.get("PYPROD_NO_EXTENSIONS") == "1":
        assert mod.__name__ == "kcore.pure.txn_partition_map"
        return
    assert mod.__name__ == "kcore.txn_partition_map"
    assert mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), mod.__file__


def test_sequences_per_partition(impl):
    assert impl.modulo == MOD
    tm = new_tm(impl)
    a, b, c = batch(impl, TP0, 3), batch(impl, TP1, 2), batch(impl, TP0, 4)
    for x in (a, b, c):
        tm.assign(x)
        tm.remove(x, acked=True)
    assert [x.base_sequence for x in (a, b, c)] == [0, 0, 3]
    assert [header(x) for x in (a, b, c)] == [(PID, EPOCH, 0), (PID, EPOCH, 0), (PID, EPOCH, 3)]
    assert all(tm.in_current_epoch(x) for x in (a, b, c))
    assert not tm.in_current_epoch(batch(impl))


def test_sequences_wrap_at_2_31(impl):
    tm = new_tm(impl)
    big = batch(impl)
    big.record_count = MOD - 3  # as if that many records went before
    tm.assign(big)
    tm.remove(big, acked=True)
    a, b = batch(impl, records=5), batch(impl, records=1)
    tm.assign(a)
    tm.remove(a, acked=True)
    assert a.base_sequence == MOD - 3
    tm.assign(b)
    assert b.base_sequence == 2 and header(b) == (PID, EPOCH, 2)
    assert tm.is_first_in_flight(b)
    assert not tm.retry_out_of_order(b)  # due next after a's end, across the wrap


def test_can_drain_limits(impl):
    assert not new_tm(impl, pid=None).can_drain(batch(impl))  # no producer id yet
    tm = new_tm(impl, max_in_flight=3)
    bs = [batch(impl) for _ in range(5)]
    assert tm.can_drain(bs[0])
    tm.assign(bs[0])
    assert not tm.can_drain(bs[1])  # one in flight until the partition's first ack
    assert tm.can_drain(batch(impl, TP1))  # per partition
    tm.remove(bs[0], acked=True)
    for b in bs[1:4]:
        assert tm.can_drain(b)
        tm.assign(b)
    assert not tm.can_drain(bs[4])  # max_in_flight
    tm.remove(bs[1], acked=True)
    assert tm.can_drain(bs[4])


def test_ordered_retries(impl):
    tm = new_tm(impl)
    first = batch(impl)
    tm.assign(first)
    tm.remove(first, acked=True)
    b1, b2, b3 = batch(impl, records=2), batch(impl), batch(impl)
    for b in (b1, b2, b3):
        tm.assign(b)
    assert [b.base_sequence for b in (b1, b2, b3)] == [1, 3, 4]
    tm.remove(b1)  # b1 failed (retriable): back to its queue
    tm.waiting(b1)
    assert not tm.can_drain(b1)  # b2 and b3 have higher sequences in flight
    assert tm.retry_out_of_order(b2)  # b2 came out of turn (b1 was due)
    tm.remove(b2)
    tm.waiting(b2)
    tm.remove(b3)
    tm.waiting(b3)
    assert tm.can_drain(b1)
    tm.assign(b1)
    assert b1.base_sequence == 1 and header(b1) == (PID, EPOCH, 1)  # kept
    assert tm.can_drain(b2)
    tm.assign(b3)  # out of order: kept sorted by sequence
    tm.assign(b2)
    assert tm.is_first_in_flight(b1)
    tm.remove(b1, acked=True)
    assert tm.is_first_in_flight(b2) and not tm.is_first_in_flight(b3)
    assert (b2.base_sequence, b3.base_sequence) == (3, 4)
    assert not tm.retry_out_of_order(b2)  # the one due next: refused for real


def test_acks_crossing_keep_the_furthest(impl):
    tm = new_tm(impl)
    ahead = stamped(impl, MOD - 3, records=5)  # ends at 2, after the wrap
    behind = stamped(impl, MOD - 8, records=5)  # ends at MOD - 3
    for b in (behind, ahead):
        tm.assign(b)
    tm.remove(ahead, acked=True)
    tm.remove(behind, acked=True)  # an older answer arriving late
    assert not tm.retry_out_of_order(stamped(impl, 2))
    assert tm.retry_out_of_order(stamped(impl, MOD - 3))
    tm.remove(stamped(impl, 10), acked=True)  # further: moves on
    assert not tm.retry_out_of_order(stamped(impl, 11))
    tm.remove(stamped(impl, 0, pid=PID + 1), acked=True)  # another producer id: ignored
    assert not tm.retry_out_of_order(stamped(impl, 11))


def test_failed_requests_a_reset(impl):
    tm = new_tm(impl)
    unsent = batch(impl)
    tm.failed(unsent)  # no sequence: no gap
    assert not tm.reset_pending and tm.resets == 0
    b = batch(impl)
    tm.assign(b)
    tm.failed(b)
    assert tm.reset_pending and not tm.has_producer_id() and tm.resets == 1
    tm.request_reset()
    assert tm.resets == 1
    assert not tm.is_first_in_flight(b)
    assert tm.needs_producer_id()  # nothing in flight, nothing waiting
    tm.set_producer_id(PID + 1, 0)
    assert tm.has_producer_id() and not tm.reset_pending
    assert not tm.in_current_epoch(b)
    tm.assign(b)  # restamped under the new producer id, sequences from 0
    assert header(b) == (PID + 1, 0, 0)


def test_bump_epoch(impl):
    tm = new_tm(impl)
    assert not tm.bump_epoch()  # no reset pending
    a, b = batch(impl), batch(impl, records=2)
    tm.assign(a)
    tm.remove(a, acked=True)
    tm.assign(b)
    tm.remove(b)
    tm.waiting(b)
    tm.not_written(b)
    tm.request_reset()
    assert tm.bump_epoch()
    assert (tm.producer_id, tm.producer_epoch) == (PID, EPOCH + 1)
    assert not tm.reset_pending and tm.has_producer_id()
    assert not tm.in_current_epoch(b)
    assert tm.can_drain(b)
    tm.assign(b)
    assert header(b) == (PID, EPOCH + 1, 0)  # fresh sequences under the new epoch
    assert not tm.can_drain(batch(impl))  # one in flight until the new epoch's first ack
    last = new_tm(impl, epoch=0x7FFF)
    last.request_reset()
    assert not last.bump_epoch()  # exhausted: a new producer id is needed
    assert last.needs_producer_id()


def test_needs_producer_id_waits_for_batches_of_unknown_fate(impl):
    assert new_tm(impl, pid=None).needs_producer_id()
    tm = new_tm(impl)
    first = batch(impl)
    tm.assign(first)
    tm.remove(first, acked=True)
    b1, b2, b3, other = batch(impl), batch(impl), batch(impl), batch(impl, TP1)
    for b in (b1, b2, b3, other):
        tm.assign(b)
    assert not tm.needs_producer_id()
    tm.failed(b3)  # expired in flight: a gap
    assert tm.reset_pending and not tm.needs_producer_id()  # b1, b2, other in flight
    for b in (b1, b2, other):  # their answers were lost with the connection
        tm.remove(b)
        tm.waiting(b)
    assert not tm.needs_producer_id()  # maybe written under the old id: ask first
    assert tm.can_drain(b1) and tm.can_drain(other)
    tm.assign(b1)
    assert b1.base_sequence == 1  # retried under the old id
    assert not tm.can_drain(b2)  # one at a time per partition
    assert tm.retry_out_of_order(b1)  # a reset is pending: it is not written, nor b2
    tm.remove(b1)
    tm.waiting(b1)
    assert not tm.needs_producer_id()  # other's fate is still unknown
    tm.assign(other)
    tm.remove(other, acked=True)  # written: done with it
    assert tm.needs_producer_id()
    assert not tm.can_drain(b2)  # known unwritten: waits for the new producer id


def test_retry_out_of_order_rules(impl):
    tm = new_tm(impl)
    b = batch(impl)
    tm.assign(b)
    assert not tm.retry_out_of_order(b)  # nothing acknowledged: surfaced
    assert tm.retry_out_of_order(stamped(impl, 0, pid=PID + 1))  # an older producer id
    assert tm.retry_out_of_order(stamped(impl, 0, epoch=EPOCH - 1))
    tm.remove(b, acked=True)
    assert not tm.retry_out_of_order(stamped(impl, 1))  # due next
    assert tm.retry_out_of_order(stamped(impl, 2))  # an earlier one is missing
    assert tm.retry_out_of_order(stamped(impl, 0))
    tm.request_reset()
    late = stamped(impl, 1)
    tm.waiting(late)
    assert tm.retry_out_of_order(late)  # a reset is pending: renumbered later
    assert tm.needs_producer_id()  # ... and known unwritten


def test_fatal_error_and_attributes(impl):
    tm = new_tm(impl, max_in_flight=4)
    assert tm.fatal_error is None and tm.max_in_flight == 4
    tm.fatal_error = ValueError("x")
    assert isinstance(tm.fatal_error, ValueError)


def test_drain_gives_sequences(k):
    """Through the accumulator (the compiled one calls the kernel's C entry points)."""
    tm = k.TxnPartitionMap(5)
    tm.set_producer_id(PID, EPOCH)
    cfg = config.build(batch_size=1024, linger_ms=0)
    acc = accumulator(k, cfg, FakeMetadata(partitions=2), tm=tm)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, txn_partitions=tm,
                    **send_settings(cfg))
    sp.send("t", b"a", partition=0)
    now = 10 ** 12
    (first,) = acc.drain(FakeMetadata().cluster, {0}, 1 << 20, now)[0]
    sp.send("t", b"b", partition=0)
    sp.send("t", b"c", partition=0)
    assert acc.drain(FakeMetadata().cluster, {0}, 1 << 20, now)[0] == []  # first not acked
    tm.remove(first, acked=True)
    (second,) = acc.drain(FakeMetadata().cluster, {0}, 1 << 20, now)[0]
    assert (first.base_sequence, second.base_sequence) == (0, 1)
    assert header(second) == (PID, EPOCH, 1) and second.record_count == 2



@pytest.mark.parametrize("partitions", [2, 600])  # 600: drain() chooses without the GIL
def test_transactional_drain_takes_only_partitions_in_the_transaction(k, partitions):
    tm = k.TxnPartitionMap(5, transactional=True)
    tm.set_producer_id(PID, EPOCH)
    cfg = config.build(batch_size=1024, linger_ms=0)
    meta = FakeMetadata(partitions=partitions)
    acc = accumulator(k, cfg, meta, tm=tm)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, txn_partitions=tm,
                    **send_settings(cfg))
    for p in range(partitions):
        sp.send("t", b"v%d" % p, partition=p)
    now = 10 ** 12
    assert acc.drain(meta.cluster, {0}, 1 << 30, now)[0] == []  # nothing added yet
    assert sorted(acc.undrained_partitions()) == [TopicPartition("t", p)
                                                   for p in range(partitions)]
    tm.add_to_transaction([TP1])
    assert tm.in_transaction(TP1) and not tm.in_transaction(TP0)
    (only,) = acc.drain(meta.cluster, {0}, 1 << 30, now)[0]
    assert only.topic_partition == TP1 and header(only) == (PID, EPOCH, 0)
    assert bytes(only.payload)[22] & 0x10  # the batch says it is transactional
    tm.txn_all = True  # transactions v2: every partition
    assert len(acc.drain(meta.cluster, {0}, 1 << 30, now)[0]) == partitions - 1
    tm.clear_transaction()
    assert not tm.txn_all and not tm.in_transaction(TP1)
    sp.send("t", b"next", partition=1)
    assert acc.drain(meta.cluster, {0}, 1 << 30, now)[0] == []
    (left,) = acc.take_undrained()
    assert left.topic_partition == TP1 and not acc.has_undrained()


def test_send_refusal_is_raised_by_send_and_send_batch(k):
    tm = k.TxnPartitionMap(5, transactional=True)
    cfg = config.build(batch_size=1024, linger_ms=0)
    acc = accumulator(k, cfg, FakeMetadata(), tm=tm)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, txn_partitions=tm,
                    **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, lambda: None, **send_settings(cfg))
    tm.send_refusal = kcore.errors.IllegalStateError("Cannot call send in state READY")
    for call in (lambda: sp.send("t", b"v"), lambda: bp.send("t", [b"v"])):
        with pytest.raises(kcore.errors.IllegalStateError, match="READY"):
            call()
    tm.send_refusal = None
    sp.send("t", b"v", partition=0)
    assert acc.undrained_partitions() == [TP0]


def test_split_halves_stay_transactional(k):
    b = k.ProducerBatch(TP0, 1024, None, 0)
    for _ in range(4):
        assert b.try_append(0, None, b"v", None, 0, 20) is not None
    b.build(PID, EPOCH, 8, True)
    halves = b.split(1024, None)
    assert [bytes(h.payload)[22] & 0x10 for h in halves] == [0x10, 0x10]
    assert [header(h) for h in halves] == [(PID, EPOCH, 8), (PID, EPOCH, 10)]
