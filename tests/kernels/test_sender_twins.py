"""The compiled kernels and their pure twins give the same batches and sequence numbers for one
scripted run, without a network: send() and send_batch() (keys, null keys on the sticky
partition, explicit partitions, headers, large values) into a seeded RecordAccumulator with an
idempotent TxnPartitionMap, then drain per node in steps as the Sender does, retrying some
batches and splitting one. Every drain (payload bytes included) and every record's partition and
offset must be the same in both; kafka-python decodes the acknowledged batches back to the script.
Without extensions both runs are the pure twin (the `both` fixture): the run is deterministic."""
import collections
import random

import pytest
from kafka.partitioner.default import murmur2
from kafka.record import MemoryRecords

from pyprod import config
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.producer import accumulator_settings, send_settings
from kcore import TxnPartitionMap

TS0 = 1_700_000_000_000
NOW0 = 10 ** 12  # the Sender's clock (ms): far past every batch's creation
STEP_MS = 60  # between drains: a retried batch (retry_backoff_ms=100) sits out one step
PID, EPOCH = 1000, 3
PARTITIONS = {"a": 5, "b": 3}


class FakeMetadata:
    """Two topics; their partitions' leaders alternate between nodes 0 and 1."""

    def __init__(self):
        self.version = 1
        topics = {t: {p: PartitionInfo(t, p, (p + (t == "b")) % 2, 0, [0, 1], [0, 1], [])
                      for p in range(n)} for t, n in PARTITIONS.items()}
        brokers = {n: Broker(n, "127.0.0.1", 9092 + n, None) for n in (0, 1)}
        self.cluster = Cluster(brokers, topics)


def _script():
    """[(topic, key, value, headers, timestamp, partition)] for send(); values are unique."""
    rng = random.Random(11)
    out = []
    for i in range(160):
        topic = "a" if i % 3 else "b"
        size = 3500 if i % 23 == 0 else rng.choice([0, 20, 200])
        key = b"key-%d" % (i % 17) if i % 5 < 2 else None
        partition = i % PARTITIONS[topic] if i % 5 == 4 else None
        headers = [("h\u00e9", b"%d" % i), ("nul", None)] if i % 4 == 0 else []
        out.append((topic, key, b"v%04d-" % i + rng.randbytes(size), headers, TS0 + 7 * i,
                    partition))
    return out


def _batch_script():
    """The columns of one send_batch() call to topic "b", as (topic, key, ...) rows too."""
    rows = []
    for j in range(40):
        key = None if j % 3 == 0 else b"bk%d" % j
        headers = [("x", b"%d" % j)] if j % 5 == 0 else []
        rows.append(("b", key, b"b%04d-" % j + b"y" * (j * 13 % 90), headers,
                     TS0 + 5000 + j, j % 3 if j % 7 == 0 else None))
    return rows


def _snapshot(batch):
    tp = batch.topic_partition
    return (tp.topic, tp.partition, batch.record_count, batch.base_sequence,
            bytes(batch.payload))


class _Run:
    """One implementation through the script; `log` is what must match the other's."""

    def __init__(self, k, compression, combined=False):
        self.combined = combined  # the Sender's ready_drain(), not ready() then drain()
        cfg = config.build(batch_size=1024, batch_max_size=4096, linger_ms=0,
                           retry_backoff_ms=100, compression_type=compression)
        self.k, self.meta = k, FakeMetadata()
        self.txn_partitions = TxnPartitionMap(5)
        self.txn_partitions.set_producer_id(PID, EPOCH)
        self.acc = k.RecordAccumulator(self.meta, self.txn_partitions, seed=7,
                                       **accumulator_settings(cfg))
        self.sp = k.SendPath(self.acc, lambda *a: None, lambda: None,
                             txn_partitions=self.txn_partitions, **send_settings(cfg))
        self.bp = k.BatchSendPath(self.sp, self.acc, lambda *a: None, lambda: None,
                                  **send_settings(cfg))
        self.log, self.acked, self.parents = [], [], {}
        self.offsets = collections.Counter()
        self.now, self.step = NOW0, 0
        self.retries = self.splits = 0

    def send(self, rows):
        return [self.sp.send(t, v, key=kb, headers=h or None, partition=p, timestamp_ms=ts)
                for t, kb, v, h, ts, p in rows]

    def send_batch(self, rows):
        cols = list(zip(*rows))
        return self.bp.send("b", list(cols[2]), keys=list(cols[1]),
                            headers=[h or None for h in cols[3]], partitions=list(cols[5]),
                            timestamps=list(cols[4]))

    def drain_step(self):
        """One Sender pass: ready, drain both nodes, then answer every batch at once."""
        acc, tm, cluster = self.acc, self.txn_partitions, self.meta.cluster
        if self.combined:
            ready, drained = acc.ready_drain(cluster, self.now, (), [1, 0], 8192)
        else:
            ready = acc.ready(cluster, self.now)
            drained = acc.drain(cluster, {0, 1}, 8192, self.now)
        self.log.append((sorted(ready.ready_nodes), ready.next_ready_check_delay_ms,
                         {node: [_snapshot(b) for b in batches]
                          for node, batches in sorted(drained.items())}))
        for node, batches in sorted(drained.items()):
            for i, batch in enumerate(batches):
                if self.step < 2 and i == 0:  # a retriable error: back to its queue
                    tm.remove(batch)
                    self.retries += 1
                    acc.reenqueue(batch, self.now)
                    tm.waiting(batch)
                elif self.step == 0 and i == 1 and batch.record_count > 1:  # too large
                    tm.remove(batch)
                    self.splits += 1
                    for half in acc.split_and_reenqueue(batch):
                        self.parents[half] = batch
                        tm.waiting(half)
                else:
                    self._ack(batch)
        self.now += STEP_MS
        self.step += 1

    def _ack(self, batch):
        tp = batch.topic_partition
        self.txn_partitions.remove(batch, acked=True)
        self.acked.append(_snapshot(batch))
        self.acc.complete(batch, base_offset=1000 * tp.partition + self.offsets[tp])
        self.offsets[tp] += batch.record_count
        parent = self.parents.pop(batch, None)
        if parent is not None and all(p.is_done for _, _, p in parent.result.pieces):
            pieces = parent.result.pieces
            self.acc.complete(parent, record_errors=self.k.piece_errors(pieces) or None)

    def drain_all(self):
        while self.acc.has_undrained():
            assert self.step < 100
            self.drain_step()


def _run(k, compression, combined=False):
    run = _Run(k, compression, combined)
    script, batch_rows = _script(), _batch_script()
    futures = run.send(script[:100])
    run.drain_step()
    run.drain_step()
    futures += run.send(script[100:130])
    batch_future = run.send_batch(batch_rows)
    futures += run.send(script[130:])
    run.drain_all()
    assert not run.acc.has_incomplete() and batch_future.is_done
    assert batch_future.exception is None
    results = [(f.get(0).topic, f.get(0).partition, f.get(0).offset) for f in futures]
    _check_decoded(run, script, batch_rows, results)
    return run, results


def _check_decoded(run, script, batch_rows, results):
    """The acknowledged batches hold every scripted record once, each where the script or its
    key put it, in script order per partition, with contiguous sequences from 0."""
    sent = script[:130] + batch_rows + script[130:]  # the order _run sends them in
    rows = {r[2]: (n, r) for n, r in enumerate(sent)}
    seen, next_seq, last = set(), collections.Counter(), {}
    for topic, partition, count, base_sequence, payload in sorted(
            run.acked, key=lambda s: (s[0], s[1], s[3])):
        assert base_sequence == next_seq[topic, partition]
        next_seq[topic, partition] += count
        records = MemoryRecords(payload)
        batch = records.next_batch()
        assert not records.has_next()
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == \
            (PID, EPOCH, base_sequence)
        decoded = list(batch)
        assert len(decoded) == count
        for r in decoded:
            n, (t, key, value, headers, ts, explicit) = rows[r.value]
            assert (t, r.key, r.timestamp, list(r.headers)) == (topic, key, ts, headers)
            if explicit is not None:
                assert partition == explicit
            elif key is not None:
                assert partition == (murmur2(key) & 0x7FFFFFFF) % PARTITIONS[topic]
            assert n > last.get((topic, partition), -1)  # in order within the partition
            last[topic, partition] = n
            seen.add(n)
    assert seen == set(range(len(sent)))
    for (topic, partition, offset), row in zip(results, script):
        assert topic == row[0] and (row[5] is None or partition == row[5])
        assert offset // 1000 == partition


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_same_batches_and_sequences(both, compression):
    (pure, pure_results), (other, other_results) = (_run(k, compression) for k in both)
    for step, (a, b) in enumerate(zip(pure.log, other.log)):
        assert a == b, "drain step %d differs" % step
    assert len(pure.log) == len(other.log)
    assert pure_results == other_results
    assert pure.acked == other.acked
    assert pure.retries > 2 and pure.splits == 2 and not pure.parents
    sticky = {(t, p) for (t, p, _), row in zip(pure_results, _script())
              if row[1] is None and row[5] is None}
    assert len(sticky) > 3  # null keys moved on from their first sticky partitions


def test_null_keys_take_the_same_sticky_partitions(both):
    """The same seed: the twins' partitioners pick the same sticky partitions."""
    picks = []
    for k in both:
        p = k.BuiltInPartitioner("t", 100, 12345)
        p.update_partitions([0, 1, 2, 3, 4, 5], 6)
        seq = []
        for _ in range(50):
            seq.append(p.sticky_partition())
            p.update_partition_info(seq[-1], 100, True)
        picks.append(seq)
    assert picks[0] == picks[1]


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_ready_drain_chooses_as_ready_then_drain(both, compression):
    """The Sender's one-section choice (ready_drain) takes the same batches, with the same
    sequences, as ready() then drain() of the ready nodes, on both twins."""
    separate, _ = _run(both[0], compression)
    for k in both:
        combined, _ = _run(k, compression, combined=True)
        assert [_drained(step) for step in combined.log] == \
            [_drained(step) for step in separate.log]
        assert combined.acked == separate.acked


def _drained(step):
    ready, delay, drained = step
    return ready, delay, {node: batches for node, batches in drained.items() if batches}
