"""Caller threads and a Sender on one accumulator, for real (issue 31, section 2): writer
threads call SendPath.send() and BatchSendPath.send() at once while a drainer thread does what
the Sender does (ready and drain, which seals each batch; decode; complete; the memory goes
back). Afterwards every record came back exactly once and byte-exact (key, value, headers,
timestamp), each thread's records kept their order within a partition, every future was told
once (and says where its record went), and the pool has all its memory back.

With the GIL this holds today. On a free-threaded build with the GIL off it fails until kcore's
locks are in: that is what the test is for (scripts/free_threaded.sh --declare-ft). There each
case runs in a forked child, so that a crash fails that case alone, with the signal and
faulthandler's stacks. Records per writer thread: $PYPROD_STRESS_RECORDS (default 4000 on a GIL
build, 15000 on a free-threaded one, where the races are to be caught)."""
import os
import random
import sys
import sysconfig
import threading
import time

import numpy as np
import pytest
from kafka.record import MemoryRecords

from pyprod import config
from pyprod.producer import send_settings
from tests.harness.forked import run_stress

from test_record_accumulator import FakeMetadata, accumulator

PARTITIONS = 4
WRITERS = ("send", "send_batch", "send", "send_batch_numpy")
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
RECORDS = int(os.environ.get("PYPROD_STRESS_RECORDS") or (15000 if FREE_THREADED else 4000))
CHUNK = 64  # rows per send_batch() call
TS0 = 1_700_000_000_000
DEADLINE_S = 30  # a hang (a batch never handed over) fails the test instead


def _rows(t, n):
    """Thread t's records as (key, value, headers, partition, timestamp): the value starts with
    (t, seq); keyed, keyless (sticky) and explicitly partitioned ones, some with headers."""
    rng = random.Random(t)
    out = []
    for i in range(n):
        kind = i % 3
        key = b"key-%d" % rng.randrange(50) if kind == 1 else None
        headers = [("h\u00e9", b"%d" % i), ("nul", None)] if i % 5 == 0 else []
        value = b"%d-%07d-" % (t, i) + rng.randbytes(rng.choice([0, 7, 60, 200]))
        value += b"." if value.endswith(b"\0") else b""  # a numpy S column drops trailing NULs
        out.append((key, value, headers, i % PARTITIONS if kind == 2 else None, TS0 + 7 * i + t))
    return out


LOWER_AT = (5, 20)  # the drainer's passes where it halves batch_max_size (a refusal's)


class _Drainer(threading.Thread):
    """The Sender's part: ready/drain (the node busy every other pass, so open batches grow),
    decode each batch, complete it with the next offsets of its partition; at LOWER_AT, what a
    batch refused as too large makes the Sender do (lower_batch_max_size) while writers
    append."""

    def __init__(self, acc, cluster, max_request_size):
        super().__init__(name="drainer", daemon=True)
        self.acc, self.cluster, self.max_request_size = acc, cluster, max_request_size
        self.writers_done = threading.Event()
        self.log = {p: [] for p in range(PARTITIONS)}  # offset order: (key, value, headers, ts)
        self.errors, self.left, self.turns = [], None, 0

    def run(self):
        acc, turn = self.acc, 0
        deadline = None
        while True:
            done = self.writers_done.is_set()
            if done and deadline is None:
                acc.begin_flush()
                deadline = time.monotonic() + DEADLINE_S
            turn += 1
            self.turns = turn
            if turn in LOWER_AT:
                acc.lower_batch_max_size(acc.batch_max_size)
            busy = {0} if turn % 2 and not done else set()
            try:
                _, drained = acc.ready_drain(self.cluster, int(time.monotonic() * 1000), busy,
                                             {0}, self.max_request_size)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.errors.append(("drain", repr(e)))
                drained = {}
            batches = [b for node in drained.values() for b in node]
            for batch in batches:
                self._take(batch)
            if done and not acc.has_undrained():
                return
            if deadline is not None and time.monotonic() > deadline:
                self.left = acc.undrained_partitions()
                return
            if not batches:
                time.sleep(0.0002)

    def _take(self, batch):
        p = batch.topic_partition.partition
        log = self.log[p]
        base = len(log)
        try:
            records = MemoryRecords(bytes(batch.payload))
            while records.has_next():
                for r in records.next_batch():
                    log.append((r.key, r.value, [(hk, hv) for hk, hv in r.headers],
                                r.timestamp))
        except BaseException as e:  # noqa: BLE001
            self.errors.append(("decode", p, repr(e)))
        if len(log) - base != batch.record_count:
            self.errors.append(("count", p, batch.record_count, len(log) - base))
            del log[base:]
            log.extend([None] * batch.record_count)  # keeps the futures' offsets comparable
        try:
            self.acc.complete(batch, base_offset=base)
        except BaseException as e:  # noqa: BLE001
            self.errors.append(("complete", p, repr(e)))


def _write(kind, t, rows, sp, bp, out, told, errors, gate):
    """One writer thread: its records through send() or send_batch() (CHUNK rows a call),
    each future with a callback that keeps what it was told."""
    gate.wait()
    try:
        if kind == "send":
            for key, value, headers, part, ts in rows:
                out.append(sp.send("t", value, key=key, headers=headers or None,
                                   partition=part, timestamp_ms=ts).add_both(told.append))
        else:
            for i in range(0, len(rows), CHUNK):
                cols = list(zip(*rows[i:i + CHUNK]))
                values, stamps = list(cols[1]), list(cols[4])
                if kind == "send_batch_numpy":  # read from the buffers without the GIL
                    values, stamps = np.array(values, "S"), np.array(stamps, np.int64)
                out.append(bp.send("t", values, keys=list(cols[0]),
                                   headers=[h or None for h in cols[2]],
                                   partitions=list(cols[3]), timestamps=stamps)
                           .add_both(told.append))
    except BaseException as e:  # noqa: BLE001
        errors.append((kind, t, repr(e)))


@pytest.fixture
def often_switching():
    """On a GIL build, threads switch every 100 us (not 5 ms): more interleavings."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("batch_size", [512, 16384])
def test_writers_and_a_drainer_lose_nothing(k, batch_size, often_switching):
    run_stress(lambda: _stress(k, batch_size), DEADLINE_S, isolate=FREE_THREADED)


def _stress(k, batch_size):
    cfg = config.build(batch_size=batch_size, batch_max_size=4 * batch_size, linger_ms=5,
                       buffer_memory=16 * 4 * batch_size, max_block_ms=DEADLINE_S * 1000)
    meta = FakeMetadata(PARTITIONS)
    acc = accumulator(k, cfg, meta)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, lambda: None, **send_settings(cfg))
    rows = [_rows(t, RECORDS) for t in range(len(WRITERS))]
    futures = [[] for _ in WRITERS]
    told = [[] for _ in WRITERS]
    errors = []
    gate = threading.Barrier(len(WRITERS))
    drainer = _Drainer(acc, meta.cluster, cfg["max_request_size"])
    writers = [threading.Thread(target=_write, args=(kind, t, rows[t], sp, bp, futures[t],
                                                     told[t], errors, gate), daemon=True)
               for t, kind in enumerate(WRITERS)]
    drainer.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join(DEADLINE_S * 2)
    drainer.writers_done.set()
    drainer.join(DEADLINE_S * 2)
    assert not any(w.is_alive() for w in writers) and not drainer.is_alive(), "a thread hangs"
    assert not errors and not drainer.errors, (errors + drainer.errors)[:5]
    assert drainer.left is None, "batches never drained: %s" % drainer.left
    if drainer.turns >= LOWER_AT[-1]:  # halved twice from 4x: no growth left
        assert acc.batch_max_size == batch_size

    # every record exactly once, byte-exact; each thread's order kept within a partition
    where = {}
    for p, log in drainer.log.items():
        last = {}
        for offset, rec in enumerate(log):
            t, seq = (int(x) for x in rec[1].split(b"-", 2)[:2])
            assert (t, seq) not in where, "record %d of thread %d twice" % (seq, t)
            where[t, seq] = (p, offset)
            key, value, headers, _, ts = rows[t][seq]
            assert rec == (key, value, headers, ts), (t, seq)
            assert seq > last.get(t, -1), "thread %d's records out of order in %d" % (t, p)
            last[t] = seq
    assert len(where) == len(WRITERS) * RECORDS

    # every future told once, of where its records went; explicit partitions kept
    for t, kind in enumerate(WRITERS):
        assert len(told[t]) == len(futures[t]), "thread %d: %d callbacks for %d futures" % (
            t, len(told[t]), len(futures[t]))
        if kind == "send":
            assert sorted((m.partition, m.offset) for m in told[t]) == sorted(
                where[t, seq] for seq in range(RECORDS)), t
            for seq, f in enumerate(futures[t]):
                md = f.get(0)
                assert (md.partition, md.offset) == where[t, seq], (t, seq)
        else:
            assert sorted(map(repr, told[t])) == sorted(repr(f.get(0)) for f in futures[t]), t
            for call, f in enumerate(futures[t]):
                counts = {}
                for seq in range(call * CHUNK, min(RECORDS, (call + 1) * CHUNK)):
                    p = where[t, seq][0]
                    counts[p] = counts.get(p, 0) + 1
                assert dict(f.get(0).partition_counts) == counts, (t, call)
        for seq, row in enumerate(rows[t]):
            assert row[3] is None or where[t, seq][0] == row[3], (t, seq)
    assert not acc.has_undrained() and not acc.has_incomplete()
    assert acc.pool.available_memory == acc.pool.total_memory
