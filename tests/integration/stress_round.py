"""One round of issue 27's concurrency stress test, in its own process (see stress_check.py).

    python tests/integration/stress_round.py --bootstrap HOST:PORT --topic T --seed S \
        --manifest PATH [--impl compiled|pure] [--grow 8,16] [--small] [--guard 240] \
        [--without mutate,fork,gc,flush,metrics]

Six threads share one KafkaProducer (buffer_memory 1 MiB) and mix send() and send_batch()
(Arrow arrays and Python lists, keyless and keyed, with headers); callbacks hold their future in
reference cycles. Alongside: a thread mutating a values list while send_batch reads it, a
gc.collect() loop, a flush() loop and a metrics() sampler. The main thread grows the topic (2 ->
8 -> 16 partitions) while a keyless send_batch runs, then forks (stress_fork.py: the forked
child must get IllegalStateError from send() and flush(), and return from metrics() and close()).
close() at the end, then the manifest (what was sent, what each future said) is written.
faulthandler prints every thread's stack on a crash, and on a hang after --guard seconds.
"""
import argparse
import collections
import collections.abc
import faulthandler
import gc
import itertools
import json
import random
import re
import sys
import threading
import time
import traceback
import zlib

from stress_check import make_value
from stress_fork import fork_check

MAIN_TID = 6  # the records the main thread sends (the workers are 0..5)
SWITCH_INTERVALS = (1e-5, 1e-4, 1e-3, 5e-3)
WITHOUT = ("mutate", "fork", "gc", "flush", "metrics")  # parts --without can leave out
# operation -> (Worker method, its arguments)
OPS = {"send_any": ("sends", None), "send_keyed": ("sends", True),
       "arrow_keyless_big": ("batch", True, False, 4000, 15000),
       "arrow_keyless": ("batch", True, False), "arrow_keyed": ("batch", True, True),
       "list_keyless": ("batch", False, False), "list_keyed": ("batch", False, True),
       "mutated": ("mutated",)}
# worker -> (records to make, {operation: weight})
ROLES = {
    0: (6000, {"send_any": 1}),
    1: (6000, {"send_keyed": 1}),
    2: (60000, {"arrow_keyless_big": 1}),  # the partition growths wait for one of these
    3: (15000, {"list_keyed": 3, "list_keyless": 1}),
    4: (10000, {"mutated": 1}),
    5: (10000, {"send_any": 1, "arrow_keyed": 1, "list_keyless": 1, "arrow_keyless": 1}),
}


class Round:
    """What the threads share: the producer, the manifest being built, the figures."""

    def __init__(self, args, producer):
        self.args, self.p, self.topic = args, producer, args.topic
        self.scale = 0.3 if args.small else 1.0
        # (tid, seq) -> (key hex, value crcs, headers, call, state, partition, offset, ts):
        # tuples of atoms, which the collector stops tracking (the gc thread stays quick)
        self.records = {}
        self.calls = {}    # call id -> what the call was and what its future said
        self.call_ids = itertools.count()
        self.errors, self.error_counts = [], collections.Counter()
        self.covered = collections.Counter()
        self.stop = threading.Event()         # time is up, or the round is ending
        self.grown = threading.Event()        # the partition growths are over

    def error(self, kind, detail):
        self.error_counts[kind] += 1
        if self.error_counts[kind] <= 10:  # examples
            self.errors.append(dict(kind=kind, detail=str(detail)[:2000]))


class Cyclic:
    """A callback argument in a reference cycle with its future; its finalizer runs Python
    code, so a collection that starts inside a kcore call can switch threads there."""
    finalized = 0

    def __del__(self):
        Cyclic.finalized += 1


class SlowRows(collections.abc.Sequence):
    """A headers column read item by item in Python, yielding the GIL as it goes (a lazy user
    sequence): the window in which another thread changes the values list."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, int) and i % 32 == 0:
            time.sleep(0)
        return self.rows[i]


def _hdr_json(h):
    return tuple((k, None if v is None else bytes(v).hex()) for k, v in (h or []))


class Worker(threading.Thread):
    def __init__(self, rnd, tid, budget=0, ops=None):
        super().__init__(name=f"worker-{tid} ({', '.join(ops or ())})", daemon=True)
        self.r, self.tid, self.budget = rnd, tid, int(budget * rnd.scale)
        self.ops = ops or {}
        self.rng = random.Random(rnd.args.seed * 100 + tid)
        self.seq = self.bigs = 0
        self.in_call = False
        self.waits_for_growth = False  # runs past its budget until the growths are over

    def run(self):
        names, weights = list(self.ops), list(self.ops.values())
        try:
            while not self.r.stop.is_set() and (self.seq < self.budget or (
                    self.waits_for_growth and not self.r.grown.is_set())):
                method, *how = OPS[self.rng.choices(names, weights)[0]]
                getattr(self, method)(*how)
        except BaseException:  # noqa: BLE001 - the round reports it
            self.r.error("a worker raised", f"{self.name}: {traceback.format_exc()}")

    # -- records --------------------------------------------------------------------------
    def size(self, big):
        x = self.rng.random()
        if big and x < 0.01 and self.bigs < 8:
            self.bigs += 1
            self.r.covered["records over 64 KiB"] += 1
            return self.rng.randrange(65 << 10, 160 << 10)
        if x < 0.75 or not big:
            return self.rng.randrange(200)
        return self.rng.randrange(200, 2000) if x < 0.98 else self.rng.randrange(2000, 16000)

    def headers(self, seq):
        x = self.rng.random()
        if x < 0.3:
            return None
        h = [("id", b"%d.%d" % (self.tid, seq))]
        if x < 0.6:
            h.append(("h\u00e9", None))
        elif x > 0.9:
            h.append(("blob", self.rng.randbytes(self.rng.randrange(300))))
        return h

    def make(self, keyed, big, call=None, headers=True, ts=None):
        """(seq, key, value, headers) of a new record, entered in the manifest."""
        seq, self.seq = self.seq, self.seq + 1
        value = make_value(self.tid, seq, self.rng.randbytes(self.size(big)))
        key = b"k%02d" % self.rng.randrange(16) if keyed else None
        hdrs = self.headers(seq) if headers else None
        self.r.records[(self.tid, seq)] = (key and key.hex(), (zlib.crc32(value),),
                                           _hdr_json(hdrs), call, "pending", None, None, ts)
        return seq, key, value, hdrs

    def set_state(self, seqs, state, partition=None, offset=None):
        recs = self.r.records
        for seq in seqs:
            rec = recs[(self.tid, seq)]
            recs[(self.tid, seq)] = rec[:4] + (state, partition, offset) + rec[7:]

    # -- futures: callbacks in reference cycles -------------------------------------------
    def hook(self, future, ok, failed, ident):
        holder = Cyclic()
        holder.me, holder.future = holder, future
        box = [holder]
        box.append(box)  # a list that holds itself
        future.add_callback(ok, ident, box)
        future.add_errback(failed, ident, box)

    def sent_ok(self, seq, _box, md):
        self.set_state([seq], "acked", md.partition, md.offset)

    def sent_failed(self, seq, _box, exc):
        self.set_state([seq], "failed")
        self.r.error("a send() future failed", repr(exc))

    def batch_ok(self, call, _box, md):
        c = self.r.calls[call]
        c["partition_counts"] = md.partition_counts
        n, seq0 = c["n"], c["seq0"]
        if md.record_count != n and not c.get("miscounted"):
            self.r.error("send_batch metadata miscounts", f"call {call}: {md} for {n}")
        # what the future speaks for (all n, unless it miscounts)
        self.set_state(range(seq0, seq0 + min(n, md.record_count)), "acked")
        self.set_state(range(seq0 + md.record_count, seq0 + n), "maybe")

    def batch_failed(self, call, _box, exc):
        c = self.r.calls[call]
        failed = {i for i, _ in getattr(exc, "failures", [(i, 0) for i in range(c["n"])])}
        for i in range(c["n"]):
            self.set_state([c["seq0"] + i], "failed" if i in failed else "acked")
        self.r.error("a send_batch future failed", repr(exc))

    # -- operations -----------------------------------------------------------------------
    def sends(self, keyed):
        for _ in range(self.rng.randrange(20, 200)):
            seq, key, value, hdrs = self.make(
                self.rng.random() < 0.5 if keyed is None else keyed, big=True)
            try:
                f = self.r.p.send(self.r.topic, value, key=key, headers=hdrs)
            except Exception:  # noqa: BLE001 - reported
                self.set_state([seq], "refused")
                return self.r.error("send() raised", traceback.format_exc(limit=4))
            self.hook(f, self.sent_ok, self.sent_failed, seq)
            self.r.covered["send() calls"] += 1

    def new_call(self, kind, n):
        call = next(self.r.call_ids)
        self.r.calls[call] = dict(tid=self.tid, kind=kind, seq0=self.seq, n=n)
        self.r.covered[f"send_batch calls ({kind})"] += 1
        return call

    def batch(self, arrow, keyed, least=50, most=3000):
        rng = self.rng
        n = max(1, int(rng.randrange(least, most) * self.r.scale))
        kind = ("arrow" if arrow else "list") + (" keyed" if keyed else " keyless")
        call = self.new_call(kind, n)
        with_headers = rng.random() < 0.7
        t0 = int(time.time() * 1000) - 5000 if not arrow and rng.random() < 0.3 else None
        rows = [self.make(keyed and rng.random() < 0.9, big=not arrow, call=call,
                          headers=with_headers, ts=None if t0 is None else t0 + i)
                for i in range(n)]
        values, keys, hdrs = ([r[j] for r in rows] for j in (2, 1, 3))
        stamps = None if t0 is None else [t0 + i for i in range(n)]
        parts = [rng.randrange(2) for _ in range(n)] \
            if not arrow and not keyed and rng.random() < 0.2 else None
        if arrow:
            values, keys = _arrow_binary(rng, values), _arrow_binary(rng, keys) if keyed else None
            hdrs = _arrow_headers(hdrs) if with_headers else None
        else:
            keys, hdrs = (keys if keyed else None), (hdrs if with_headers else None)
        del rows
        before = len(self.r.p.partitions_for(self.r.topic))
        self.in_call = True
        try:
            f = self.r.p.send_batch(self.r.topic, values, keys=keys, headers=hdrs,
                                    partitions=parts, timestamps=stamps)
        except Exception:  # noqa: BLE001 - reported
            self.set_state(range(self.r.calls[call]["seq0"], self.seq), "refused")
            self.r.error("send_batch raised", traceback.format_exc(limit=4))
            return
        finally:
            self.in_call = False
        if len(self.r.p.partitions_for(self.r.topic)) > before:
            self.r.covered[f"partition growths during a send_batch ({kind})"] += 1
        self.hook(f, self.batch_ok, self.batch_failed, call)

    def mutated(self):
        """send_batch of a values list that the mutator changes while the call reads it:
        the call raises ValueError/TypeError (then nothing of it is sent) or succeeds with
        all n records, each with its value before or after the change."""
        rng, r = self.rng, self.r
        n = max(10, int(rng.randrange(300, 3000) * r.scale))
        keyed = rng.random() < 0.5
        call = self.new_call("mutated list", n)
        seq0 = self.seq
        values, keys, hdrs = [], [], []
        for _ in range(n):
            _, key, value, h = self.make(keyed, big=True, call=call)
            values.append(value), keys.append(key), hdrs.append(h)
        kind = rng.choice(("replace", "shrink", "bad item"))
        if kind == "replace":  # same record, another body: either may be sent
            change = {}
            for j in rng.sample(range(n), min(n, rng.randrange(1, 64))):
                change[j] = make_value(self.tid, seq0 + j, rng.randbytes(rng.randrange(300)), 1)
                rec = r.records[(self.tid, seq0 + j)]
                r.records[(self.tid, seq0 + j)] = \
                    rec[:1] + (rec[1] + (zlib.crc32(change[j]),),) + rec[2:]
        else:
            change = rng.randrange(n)
        slow = rng.random() < 0.5
        r.mutator.arm(values, kind, change)
        outcome = "succeeded"
        try:
            f = r.p.send_batch(r.topic, values, keys=keys if keyed else None,
                               headers=SlowRows(hdrs) if slow else hdrs)
        except (ValueError, TypeError) as e:
            outcome = "raised " + type(e).__name__
            appended = re.search(r"(\d+) of \d+ records were appended", str(e))
            self.set_state(range(seq0, seq0 + n), "maybe" if appended else "refused")
        except Exception:  # noqa: BLE001 - reported
            outcome = "raised otherwise"
            self.set_state(range(seq0, seq0 + n), "maybe")
            r.error("send_batch of a mutated list raised", traceback.format_exc(limit=4))
        during = r.mutator.disarm()
        r.covered[f"mutations ({kind}, {'during' if during else 'after'} the call): "
                  f"{outcome}"] += 1
        if outcome == "succeeded":
            if f.record_count != n:
                r.calls[call]["miscounted"] = True
                r.error("send_batch of a mutated list took a record count it was not given",
                        f"call {call} ({kind}, {'slow' if slow else 'list'} headers): "
                        f"{f.record_count} records of {n}")
            self.hook(f, self.batch_ok, self.batch_failed, call)


def _arrow_binary(rng, items):
    """items as a pyarrow binary / large_binary array: plain, sliced or chunked."""
    import pyarrow as pa

    t = rng.choice((pa.binary(), pa.large_binary()))
    x = rng.random()
    if x < 0.3 and len(items) > 2:
        k = rng.randrange(1, len(items))
        return pa.chunked_array([pa.array(items[:k], t), pa.array(items[k:], t)])
    if x < 0.6:
        return pa.array([b"pad"] + items, t).slice(1)
    return pa.array(items, t)


def _arrow_headers(hdrs):
    import pyarrow as pa

    t = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.array([None if h is None else [{"key": k, "value": v} for k, v in h]
                     for h in hdrs], t)


class Mutator(threading.Thread):
    """Changes the values list of the call that armed it, a moment after the call starts."""

    def __init__(self, rnd):
        super().__init__(name="mutator", daemon=True)
        self.r, self.rng = rnd, random.Random(rnd.args.seed * 100 + 50)
        self.go, self.done = threading.Event(), threading.Event()
        self.job, self.call_over, self.during = None, False, False

    def arm(self, values, kind, change):
        self.job, self.call_over = (values, kind, change), False
        self.done.clear()
        self.go.set()

    def disarm(self):
        """The call returned: wait for the change; True if it came before the return."""
        self.call_over = True
        self.done.wait()
        return self.during

    def run(self):
        while not self.r.stop.is_set():
            if not self.go.wait(0.1):
                continue
            self.go.clear()
            values, kind, change = self.job
            x = self.rng.random()
            if x < 0.4:
                time.sleep(0)
            elif x < 0.8:
                time.sleep(self.rng.uniform(0, 0.003))
            if kind == "replace":
                for j, v in change.items():
                    values[j] = v
            elif kind == "shrink":
                del values[change:]
            else:
                values[change] = 12345  # not bytes
            self.during = not self.call_over
            self.done.set()
        self.done.set()


def _loop(rnd, name, pause, body):
    """A helper thread calling body() every pause() seconds until the round stops."""
    def run():
        try:
            while not rnd.stop.wait(pause()):
                body()
        except BaseException:  # noqa: BLE001 - reported
            rnd.error(f"the {name} thread raised", traceback.format_exc())
    return threading.Thread(target=run, name=name, daemon=True)


def helpers(rnd):
    rng = random.Random(rnd.args.seed * 100 + 60)
    c = rnd.covered

    def collect():
        c["gc collections"] += 1
        if gc.collect(rng.choices((0, 1, 2), (10, 6, 3))[0]):
            c["gc collections that freed cycles"] += 1

    def flush():
        rnd.p.flush(timeout=rnd.args.guard / 2)
        c["flush() calls"] += 1

    def sample():
        m = rnd.p.metrics()["producer-metrics"]
        c["metrics samples"] += 1
        if m["waiting-threads"]:
            c["samples with threads waiting for memory"] += 1
        if m["buffer-available-bytes"] < 64 << 10:
            c["samples with < 64 KiB of buffer free"] += 1

    loops = [_loop(rnd, "gc", lambda: rng.uniform(0, 0.01), collect),
             _loop(rnd, "flush", lambda: rng.uniform(0.05, 0.4), flush),
             _loop(rnd, "metrics", lambda: 0.002, sample)]
    return [t for t in loops if t.name not in rnd.args.without]


def grow(rnd, admin, total, batcher, me):
    """Grow the topic to `total` partitions; once the broker says so, make the producer learn
    it (a send to the new last partition) just as `batcher` starts a keyless send_batch."""
    from kafka.admin import NewPartitions

    admin.create_partitions({rnd.topic: NewPartitions(total_count=total)})
    rnd.covered["partition growths"] += 1
    while len(admin.describe_topics([rnd.topic])[0]["partitions"]) < total:
        time.sleep(0.05)
    seq, _, value, hdrs = me.make(False, big=False)
    while not batcher.in_call and not rnd.stop.is_set():
        time.sleep(0.0002)
    deadline = time.monotonic() + rnd.args.guard / 4
    while True:
        try:
            f = rnd.p.send(rnd.topic, value, headers=hdrs, partition=total - 1)
            break
        except ValueError:  # "Unrecognized partition": the broker's metadata still lags
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    me.hook(f, me.sent_ok, me.sent_failed, seq)


def _wait_progress(rnd, workers, frac):
    want = frac * sum(w.budget for w in workers)
    while sum(w.seq for w in workers) < want and not rnd.stop.is_set():
        time.sleep(0.005)


def _check_impl(impl):
    import kcore

    pure = ".pure." in kcore.SendPath.__module__
    if kcore.EXTENSIONS != (impl == "compiled") or pure != (impl == "pure"):
        sys.exit(f"stress_round: wanted the {impl} kcore, loaded EXTENSIONS={kcore.EXTENSIONS} "
                 f"SendPath from {kcore.SendPath.__module__}")
    where = sys.modules[kcore.SendPath.__module__].__file__
    print(f"stress_round: {impl} kcore ({where})", file=sys.stderr)


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True, help="an existing topic with 2 partitions")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--impl", choices=("compiled", "pure"), default="compiled")
    ap.add_argument("--grow", default="8,16",
                    help="partition counts to grow to, in order ('' for none)")
    ap.add_argument("--small", action="store_true", help="fewer records (sanitizer builds)")
    ap.add_argument("--guard", type=float, default=240.0, help="hang guard, seconds")
    ap.add_argument("--without", default="", help="leave out some of: " + ",".join(WITHOUT))
    args = ap.parse_args(argv)
    args.without = set(filter(None, args.without.split(",")))
    if args.without - set(WITHOUT):
        ap.error(f"--without: {', '.join(args.without - set(WITHOUT))} is none of {WITHOUT}")
    args.grow = [int(n) for n in args.grow.split(",") if n]
    return args


def _config(args, rng):
    return dict(bootstrap_servers=args.bootstrap, buffer_memory=1 << 20,
                batch_size=rng.choice((16384, 65536)), linger_ms=rng.choice((0, 1, 5)),
                compression_type=rng.choice((None, None, "lz4")),
                max_block_ms=int(args.guard * 500), delivery_timeout_ms=int(args.guard * 1000),
                request_timeout_ms=60000,
                metadata_max_age_ms=60000)  # grow() says when to learn more


def _phases(rnd, workers):
    """The main thread: the growths during a keyless send_batch, then the fork."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=rnd.args.bootstrap)
    me = Worker(rnd, MAIN_TID)
    try:
        for frac, total in zip((0.1, 0.3), rnd.args.grow):
            _wait_progress(rnd, workers, frac)
            grow(rnd, admin, total, workers[2], me)
        rnd.grown.set()
        _wait_progress(rnd, workers, 0.5)
        if "fork" not in rnd.args.without:
            rnd.covered["forks"] += 1
            bad = fork_check(rnd.p, rnd.topic, guard=30 if rnd.args.small else 15)
            for s in bad:
                rnd.error("the forked child", s)
            if not bad:
                rnd.covered["forks whose child behaved"] += 1
    except Exception:  # noqa: BLE001 - reported
        rnd.error("the main thread raised", traceback.format_exc())
    finally:
        rnd.grown.set()
        admin.close()


def main(argv=None):
    args = _args(argv)
    faulthandler.enable(all_threads=True)
    faulthandler.dump_traceback_later(args.guard, exit=True)
    _check_impl(args.impl)
    import pyarrow  # noqa: F401 - before the threads (send_batch looks it up in sys.modules)

    from pyprod import KafkaProducer

    rng = random.Random(args.seed)
    switch = rng.choice(SWITCH_INTERVALS)
    sys.setswitchinterval(switch)
    config = _config(args, rng)
    print(f"stress_round: seed {args.seed}, switch interval {switch}, {config}", file=sys.stderr)
    p = KafkaProducer(**config)
    rnd = Round(args, p)
    rnd.mutator = Mutator(rnd)
    roles = dict(ROLES)
    if "mutate" in args.without:  # the mutator's partner sends plain lists instead
        roles[4] = (roles[4][0], {"list_keyless": 1, "list_keyed": 1})
    workers = [Worker(rnd, tid, budget, ops) for tid, (budget, ops) in roles.items()]
    workers[2].waits_for_growth = True
    others = [rnd.mutator] + helpers(rnd)
    for t in workers + others:
        t.start()
    for t in threading.enumerate():  # names for the stacks faulthandler prints
        print(f"stress_round: thread 0x{t.ident:016x} is {t.name}", file=sys.stderr)
    timer = threading.Timer(args.guard / 2, rnd.stop.set)  # a cap: the round ends early
    timer.start()
    _phases(rnd, workers)
    for w in workers:
        w.join()
    rnd.stop.set()
    timer.cancel()
    for t in others:
        t.join()
    partitions = len(p.partitions_for(args.topic))
    try:
        p.flush(timeout=args.guard / 4)
    except Exception:  # noqa: BLE001 - reported
        rnd.error("the last flush() raised", traceback.format_exc())
    p.close(timeout=args.guard / 4)
    rnd.covered["callback cycles finalized"] = Cyclic.finalized
    rnd.covered["records made"] = len(rnd.records)
    with open(args.manifest, "w") as f:
        json.dump(dict(records=[[tid, seq, *v] for (tid, seq), v in rnd.records.items()],
                       calls=rnd.calls, errors=rnd.errors, error_counts=rnd.error_counts,
                       covered=rnd.covered, partitions=partitions, counts=[2] + args.grow,
                       config=dict(config, switch_interval=switch)), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
