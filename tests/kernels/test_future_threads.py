"""Futures under threads (issue 31: kcore without the GIL), on both implementations: callers
register callbacks, errbacks, waits and asyncio awaits on a batch's result while another
thread completes it (or several do at once). Every registration is called exactly once with
the right outcome, no waiter is left asleep, and a record's value is one object. With the GIL
the races are rare (a short switch interval helps); with PYTHON_GIL=0 they are real."""
import asyncio
import random
import threading
from collections import Counter

import pytest

WORKERS = 6
PER_WORKER = 8  # futures per worker per round
ROUNDS = 150


class Boom(Exception):
    pass


pytestmark = pytest.mark.usefixtures("often_switch")  # tests/harness/fixtures.py


def _spin():
    for _ in range(random.randrange(300)):
        pass


def _batch(k, n=WORKERS * PER_WORKER):
    result = k.ProduceRequestResult(k.TopicPartition("t", 1))
    return result, [k.FutureRecordMetadata(result, i, 1000 + i, 1, 2, -1) for i in range(n)]


class Rounds:
    """Persistent worker threads that run `work(w, state)` once per round, all at once, while
    the main thread runs `race(state)`; a worker's exception fails the test."""

    def __init__(self, workers, work):
        self.state, self.errors = None, []
        self._start = threading.Barrier(workers + 1, timeout=30)
        self._end = threading.Barrier(workers + 1, timeout=30)
        self._threads = [threading.Thread(target=self._run, args=(w, work), daemon=True)
                         for w in range(workers)]
        for t in self._threads:
            t.start()

    def _run(self, w, work):
        try:
            while True:
                self._start.wait()
                try:
                    work(w, self.state)
                except BaseException as e:  # noqa: B036 - reported by the main thread
                    self.errors.append(e)
                self._end.wait()
        except threading.BrokenBarrierError:  # close()
            return

    def round(self, state, race):
        self.state = state
        self._start.wait()
        race(state)
        self._end.wait()
        if self.errors:
            raise self.errors[0]

    def close(self):
        self._start.abort()
        self._end.abort()
        for t in self._threads:
            t.join(10)


def _mine(futures, w):
    return futures[w * PER_WORKER:(w + 1) * PER_WORKER]


def _outcome(i, mode):
    """(exception or None) of record i in a round completed with `mode`."""
    if mode == "error":
        return "batch"
    if mode == "record_errors" and i % 3 == 0:
        return "record"
    return None


def _complete(result, mode, base):
    if mode == "error":
        result.done(error=Boom("batch"))
    elif mode == "record_errors":
        result.done(base, record_errors={i: Boom("record")
                                         for i in range(0, WORKERS * PER_WORKER, 3)})
    else:
        result.done(base)


def test_callbacks_race_completion(k):
    """add_callback / add_errback / add_both from six threads while the main thread completes
    the batch: each registration runs once, callbacks on success, errbacks on failure."""
    def work(w, st):
        _spin()
        for f in _mine(st["futures"], w):
            f.add_callback(lambda tag, m: st["calls"].append((tag, m)), ("cb", id(f)))
            f.add_errback(lambda tag, e: st["calls"].append((tag, e)), ("eb", id(f)))
            f.add_both(lambda tag, x: st["calls"].append((tag, x)), ("both", id(f)))

    rounds = Rounds(WORKERS, work)
    try:
        for r in range(ROUNDS):
            mode = ("ok", "error", "record_errors")[r % 3]
            result, futures = _batch(k)
            st = {"futures": futures, "calls": []}
            rounds.round(st, lambda st: (_spin(), _complete(result, mode, 100 * r)))
            seen = Counter(tag for tag, _ in st["calls"])
            assert all(n == 1 for n in seen.values()), [t for t, n in seen.items() if n > 1]
            by_tag = dict(st["calls"])
            for i, f in enumerate(futures):
                failure = _outcome(i, mode)
                assert (("cb", id(f)) in by_tag) == (failure is None)
                assert (("eb", id(f)) in by_tag) == (failure is not None)
                got = by_tag[("both", id(f))]
                if failure is None:
                    assert got.offset == 100 * r + i and got is f.value
                else:
                    assert isinstance(got, Boom) and str(got) == failure
    finally:
        rounds.close()


def test_racing_completions_complete_once(k):
    """Every worker completes the batch (each with its own offset) while registering: one
    completion wins, every callback runs once and sees the winner's offset."""
    def work(w, st):
        futures = _mine(st["futures"], w)
        for f in futures[:PER_WORKER // 2]:
            f.add_callback(lambda m: st["calls"].append(m))
        _spin()
        st["result"].done(1000 * (w + 1))
        for f in futures[PER_WORKER // 2:]:
            f.add_callback(lambda m: st["calls"].append(m))

    rounds = Rounds(WORKERS, work)
    try:
        for _ in range(ROUNDS):
            result, futures = _batch(k)
            st = {"result": result, "futures": futures, "calls": []}
            rounds.round(st, lambda st: None)
            base = result.base_offset
            assert base in {1000 * (w + 1) for w in range(WORKERS)}
            assert sorted(m.offset for m in st["calls"]) == [base + i for i in range(len(futures))]
    finally:
        rounds.close()


def test_waiters_are_woken(k):
    """get() and wait() from six threads while the batch completes: none times out, each gets
    its record's outcome."""
    def work(w, st):
        _spin()
        if w % 2:
            assert st["result"].wait(10)
        for i, f in enumerate(st["futures"]):
            if i // PER_WORKER != w:
                continue
            if st["mode"] == "ok":
                assert f.get(10).offset == st["base"] + i
            else:
                with pytest.raises(Boom):
                    f.get(10)

    rounds = Rounds(WORKERS, work)
    try:
        for r in range(ROUNDS):
            result, futures = _batch(k)
            mode = ("ok", "error")[r % 2]
            st = {"result": result, "futures": futures, "base": 7 * r, "mode": mode}
            rounds.round(st, lambda st: (_spin(), _complete(result, mode, st["base"])))
    finally:
        rounds.close()


def test_value_is_one_object(k):
    """Threads asking a done record's value at once all get the same RecordMetadata."""
    def work(w, st):
        st["seen"].append([f.value for f in st["futures"]])
        st["seen"].append([f.get() for f in st["futures"]])

    rounds = Rounds(WORKERS, work)
    try:
        for r in range(ROUNDS // 3):
            result, futures = _batch(k)
            result.done(r)
            st = {"futures": futures, "seen": []}
            rounds.round(st, lambda st: None)
            for values in st["seen"]:
                assert all(v is f.value for v, f in zip(values, futures))
            assert [f.value.offset for f in futures] == [r + i for i in range(len(futures))]
    finally:
        rounds.close()


def test_loop_calls_race_completion(k):
    """add_loop_call from six threads on one running loop while the batch completes: each call
    registered (True) runs once on the loop; a False one was done already."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    ran, ran_all = [], threading.Event()

    def work(w, st):
        _spin()
        for f in _mine(st["futures"], w):
            tag = (st["round"], id(f))
            if not f.add_loop_call(loop, ran.append, tag):
                st["late"].append(tag)

    rounds = Rounds(WORKERS, work)
    try:
        expected = Counter()
        for r in range(ROUNDS):
            result, futures = _batch(k)
            st = {"futures": futures, "round": r, "late": []}
            rounds.round(st, lambda st: (_spin(), result.done(r)))
            expected.update((r, id(f)) for f in futures)
            expected.subtract(st["late"])
        loop.call_soon_threadsafe(ran_all.set)  # after every posted call
        assert ran_all.wait(10)
        assert min(expected.values()) >= 0 and Counter(ran) == +expected
    finally:
        rounds.close()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()


def test_awaits_race_completion(k):
    """Three threads each run an asyncio loop awaiting the records of a batch another thread
    completes: no await hangs, each returns its record's metadata or raises its error."""
    loops = 3
    start = threading.Barrier(loops + 1, timeout=30)
    end = threading.Barrier(loops + 1, timeout=30)
    batches, errors = [], []

    async def one(f):
        try:
            return (await f).offset
        except Boom as e:
            return str(e)

    async def body(w):
        try:
            for r in range(ROUNDS // 3):
                start.wait()  # blocks the loop: nothing else runs on it meanwhile
                futures = batches[r][1]
                got = await asyncio.wait_for(asyncio.gather(*map(one, futures)), 10)
                want = [_outcome(i, "record_errors") or 10 * r + i for i in range(len(futures))]
                if got != want:
                    errors.append((r, w, got, want))
                end.wait()
        except BaseException as e:  # noqa: B036 - reported by the main thread
            errors.append(e)
            start.abort()
            end.abort()

    threads = [threading.Thread(target=asyncio.run, args=(body(w),), daemon=True)
               for w in range(loops)]
    for t in threads:
        t.start()
    for r in range(ROUNDS // 3):
        batches.append(_batch(k))
        start.wait()
        _spin()
        _complete(batches[r][0], "record_errors", 10 * r)
        end.wait()
    for t in threads:
        t.join(10)
    assert not errors
