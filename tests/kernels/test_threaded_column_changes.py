"""send_batch while other threads change the lists it is given (issue 41, part 3): a mutator
thread clears, appends to, truncates, refills and stores into the columns while two sender
threads pass the same lists to send_batch, each to its own accumulator with a drainer thread
doing the Sender's part (test_threaded_send_stress._Drainer). Only the documented ValueError
of a column whose length changed may escape a call (a free-threaded build with the GIL off
raised IndexError from a list read by index, and a borrowed item could be freed under it);
a call that raised appended nothing, and every record of a call that returned is byte-exact
and where it was in the list when read (the mutator keeps item i of every list saying i).
Both implementations; on a free-threaded build each case runs in a forked child, so that a
crash fails that case alone. Calls per sender: $PYPROD_MUTATION_CALLS (default 300 with the
GIL, 1500 free-threaded)."""
import os
import random
import re
import threading
import time

import pytest

from pyprod import config
from pyprod.producer import send_settings
from tests.harness.forked import run_stress

from test_record_accumulator import FakeMetadata, accumulator
from test_threaded_send_stress import (DEADLINE_S, FREE_THREADED, _Drainer,  # noqa: F401
                                       often_switching)

SENDERS = 2
CALLS = int(os.environ.get("PYPROD_MUTATION_CALLS") or (1500 if FREE_THREADED else 300))
MAX_ROWS = 40
TS0 = 1_700_000_000_000  # a multiple of 1000: record i's timestamps end in i
DOCUMENTED = re.compile(r"(values|keys|headers|partitions|timestamps) (changed during send_batch|"
                        r"has \d+ entries but values has)")


def _value(g, i):
    """Item i of generation g of the values column (and, prefixed, of the others)."""
    return b"%d-%d-" % (g, i) + bytes([(g * 31 + i) % 251]) * ((g + i) % 23)


_COLUMNS = {  # name: item i of generation g
    "values": _value,
    "keys": lambda g, i: b"k" + _value(g, i),
    "headers": lambda g, i: [("h", b"h" + _value(g, i))],
    "partitions": lambda g, i: 0,
    "timestamps": lambda g, i: TS0 + 1000 * g + i,
}
CASES = {  # case: the columns given, and whether values go through a serializer
    "values": (["values"], False),
    "values_serialized": (["values"], True),
    "every_column": (list(_COLUMNS), False),
}


def _mutate(cols, stop, seed):
    """Change the lists until stop is set: mostly store into them (their length kept), else
    append, extend, pop, truncate, clear or refill them, each list after the other. Item i of
    each list is always generation-something's item i."""
    rng, g = random.Random(seed), 0
    while not stop.is_set():
        g += 1
        op = rng.choice(["store"] * 6 + ["append", "extend", "pop", "truncate", "clear",
                                         "refill"])
        at, cut, size = (rng.randrange(MAX_ROWS) for _ in range(3))
        for name, col in cols.items():
            item = _COLUMNS[name]
            n = len(col)  # only this thread changes the lengths
            if op == "store" and n:
                col[at % n] = item(g, at % n)
            elif op == "append" and n < MAX_ROWS:
                col.append(item(g, n))
            elif op == "extend":
                col.extend(item(g, j) for j in range(n, n + 3))
            elif op == "pop" and n:
                col.pop()
            elif op == "truncate":
                del col[cut:]
            elif op == "clear":
                col.clear()
            elif op == "refill":
                col[:] = [item(g, j) for j in range(size)]
        if g % 4 == 0:  # a GIL build: the senders' turn, some of it where lengths agree
            time.sleep(0)


def _sender(k, case, cols, calls, out):
    """One sender thread's accumulator, drainer and calls; out: (futures, errors, drainer)."""
    serialized = CASES[case][1]
    cfg = config.build(batch_size=512, batch_max_size=2048, linger_ms=5,
                       buffer_memory=64 * 2048, max_block_ms=DEADLINE_S * 1000,
                       value_serializer=(lambda v: v) if serialized else None)
    meta = FakeMetadata(1)  # one partition: the log is the calls' records in call order
    acc = accumulator(k, cfg, meta)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **send_settings(cfg))
    bp = k.BatchSendPath(sp, acc, lambda *a: None, lambda: None, **send_settings(cfg))
    drainer = _Drainer(acc, meta.cluster, cfg["max_request_size"])
    futures, errors = [], []
    out.append((acc, futures, errors, drainer))
    drainer.start()

    def run():
        for _ in range(calls):
            try:
                futures.append(bp.send("t", **cols))
            except BaseException as e:  # noqa: BLE001 - checked by the test
                errors.append(e)
            time.sleep(0)  # a GIL build: the mutator's turn
        drainer.writers_done.set()
    return run


def _run(k, case):
    names, _ = CASES[case]
    cols = {name: [_COLUMNS[name](0, i) for i in range(MAX_ROWS // 2)] for name in names}
    stop, senders = threading.Event(), []
    runs = [_sender(k, case, cols, CALLS, senders) for _ in range(SENDERS)]
    threads = [threading.Thread(target=r, daemon=True) for r in runs]
    mutator = threading.Thread(target=_mutate, args=(cols, stop, 41), daemon=True)
    mutator.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S * 2)
    stop.set()
    mutator.join(DEADLINE_S)
    assert not any(t.is_alive() for t in threads + [mutator]), "a thread hangs"
    sent = failed = 0
    for acc, futures, errors, drainer in senders:
        drainer.join(DEADLINE_S * 2)
        assert not drainer.is_alive() and drainer.left is None, "batches never drained"
        assert not drainer.errors, drainer.errors[:5]
        odd = [repr(e) for e in errors
               if type(e) is not ValueError or not DOCUMENTED.match(str(e))]
        assert not odd, odd[:5]
        _check_log(case, drainer.log[0], futures)
        assert not acc.has_undrained() and not acc.has_incomplete()
        assert acc.pool.available_memory == acc.pool.total_memory
        sent, failed = sent + len(futures), failed + len(errors)
    assert sent, "no call went through (%d raised ValueError)" % failed


def _check_log(case, log, futures):
    """The calls that returned, in order, made the log: record j of a call is item j of some
    generation of each column (byte-exact); the calls that raised appended nothing."""
    names, _ = CASES[case]
    at = 0
    for f in futures:
        n = f.get(0).record_count
        for j, (key, value, headers, ts) in enumerate(log[at:at + n]):
            g = int(value.split(b"-", 1)[0])
            assert value == _value(g, j), (at, j, value)
            if "keys" in names:
                assert key == b"k" + _value(int(key[1:].split(b"-", 1)[0]), j), (at, j, key)
                assert len(headers) == 1 and headers[0][0] == "h", (at, j, headers)
                h = headers[0][1]
                assert h == b"h" + _value(int(h[1:].split(b"-", 1)[0]), j), (at, j, h)
                assert ts % 1000 == j, (at, j, ts)
            else:
                assert key is None and headers == [], (at, j)
        at += n
    assert at == len(log), "%d records logged, %d in the calls that returned" % (len(log), at)


@pytest.mark.parametrize("case", list(CASES))
def test_columns_changed_by_another_thread(k, case, often_switching):
    run_stress(lambda: _run(k, case), DEADLINE_S, isolate=FREE_THREADED)
