"""Every future pyprod returns is awaitable on an asyncio loop without blocking it, on both kcore
implementations (fixture ``k``): FutureRecordMetadata (completed by another thread, as the
Sender does), kafka-python's Future, BatchFuture, and pyprod's TransactionalRequestResult.
Completion wakes the loop with call_soon_threadsafe once per completion pass, never per
record; the sync API is unchanged. No broker."""
import asyncio
import gc
import threading
import weakref

import pytest

from pyprod import errors
from pyprod.transaction_manager import TransactionalRequestResult


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts call_soon_threadsafe: the wakeups from other threads."""
    wakeups = 0

    def call_soon_threadsafe(self, *args, **kwargs):
        self.wakeups += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def run(coro_fn):
    loop = CountingLoop()
    try:
        return loop.run_until_complete(coro_fn(loop))
    finally:
        loop.close()


def in_thread(fn):
    """Run fn in another thread now and wait for it (the loop is blocked meanwhile: whatever
    it completes is one pass as far as the loop can tell)."""
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def records(k, n, partition=0, result=None):
    result = result or k.ProduceRequestResult(k.TopicPartition("t", partition))
    return result, [k.FutureRecordMetadata(result, i, 1000 + i, 1, 2, 0) for i in range(n)]


def test_a_batch_of_awaited_records_wakes_the_loop_once(k):
    async def main(loop):
        result, futures = records(k, 500)
        tasks = [asyncio.ensure_future(f) for f in futures]
        await asyncio.sleep(0)  # every task is waiting now
        threading.Timer(0.02, result.done, (70, -1)).start()
        got = await asyncio.gather(*tasks)
        assert [m.offset for m in got] == list(range(70, 570))
        assert got[3].timestamp == 1003 and got[3].topic_partition == ("t", 0)
        return loop.wakeups
    assert run(main) == 1


def test_many_batches_completed_in_one_pass_wake_the_loop_once(k):
    async def main(loop):
        batches = [records(k, 50, partition=p) for p in range(8)]
        tasks = [asyncio.ensure_future(f) for _, fs in batches for f in fs]
        await asyncio.sleep(0)
        in_thread(lambda: [r.done(p * 100, 5) for p, (r, _) in enumerate(batches)])
        got = await asyncio.gather(*tasks)
        assert [(m.partition, m.offset) for m in got] == [
            (p, p * 100 + i) for p in range(8) for i in range(50)]
        assert {m.timestamp for m in got} == {5}  # LogAppendTime
        assert batches[0][1][0].timestamp_type == 1
        return loop.wakeups
    assert run(main) == 1


def test_done_futures_and_failures(k):
    async def main(loop):
        result, (ok, bad) = records(k, 2)
        result.done(10, -1, None, {1: errors.InvalidRecordError("bad record")})
        assert (await ok).offset == 10
        with pytest.raises(errors.InvalidRecordError, match="bad record"):
            await bad
        assert ok.timestamp_type == 0
        failed, (f,) = records(k, 1)
        threading.Timer(0.01, failed.done, (-1, -1, errors.NotLeaderForPartitionError())).start()
        with pytest.raises(errors.NotLeaderForPartitionError):
            await f
        return loop.wakeups
    assert run(main) == 1  # only the one that was not done when awaited


def test_a_cancelled_await_leaves_the_others_of_its_batch(k):
    async def main(loop):
        result, (a, b) = records(k, 2)
        ta, tb = asyncio.ensure_future(a), asyncio.ensure_future(b)
        await asyncio.sleep(0)
        ta.cancel()
        await asyncio.sleep(0)
        in_thread(lambda: result.done(0, -1))
        assert (await tb).offset == 1
        assert ta.cancelled()
        assert a.get().offset == 0  # the sync API is untouched
    run(main)


def test_awaits_from_two_loops(k):
    result, futures = records(k, 4)
    seen = {}

    def other_loop(name, mine):
        async def main(loop):
            seen[name] = [m.offset for m in await asyncio.gather(*mine)]
        run(main)

    threads = [threading.Thread(target=other_loop, args=(n, futures[n::2])) for n in (0, 1)]
    for t in threads:
        t.start()
    threading.Timer(0.05, result.done, (0, -1)).start()
    for t in threads:
        t.join(5)
    assert seen == {0: [0, 2], 1: [1, 3]}


def test_future_and_batch_future_are_awaitable(k):
    async def main(loop):
        early = k.Future()
        threading.Timer(0.01, early.failure, (errors.KafkaTimeoutError("late"),)).start()
        with pytest.raises(errors.KafkaTimeoutError, match="late"):
            await early
        assert await k.Future().success(7) == 7
        batch = k.BatchFuture("t", 3)
        batch.add_pending(3)
        batch.seal()
        threading.Timer(0.01, batch.range_done, (2, 0, 3)).start()
        meta = await batch
        assert meta.record_count == 3 and meta.partition_counts == {2: 3}
    run(main)


def test_transactional_request_result_is_awaitable():
    async def main(loop):
        ok = TransactionalRequestResult("EndTxn(COMMIT)")
        threading.Timer(0.01, ok.done).start()
        assert await ok is None
        assert await ok is None  # again, done
        fenced = TransactionalRequestResult("EndTxn(COMMIT)")
        fenced.done(errors.ProducerFencedError("fenced"))
        with pytest.raises(errors.ProducerFencedError):
            await fenced
        assert ok.wait(0) is True
    run(main)


def test_no_await_no_loop_work(k):
    """A batch nobody awaits completes as before: no loop is touched."""
    async def main(loop):
        result, futures = records(k, 100)
        in_thread(lambda: result.done(0, -1))
        assert futures[-1].get().offset == 99
        return loop.wakeups
    assert run(main) == 0


class SoonCountingLoop(asyncio.SelectorEventLoop):
    """Counts call_soon: the Handles made on the loop's own thread."""
    handles = 0

    def call_soon(self, *args, **kwargs):
        self.handles += 1
        return super().call_soon(*args, **kwargs)


def test_record_future_callbacks_soon_in_order_one_handle(k, futures_of):
    """pyprod.aio's RecordFuture: callbacks added to done futures (asyncio.gather of a window
    of acknowledged records) run soon, never inside add_done_callback, in order, each in its
    context, in one loop callback; one that raises goes to the loop's exception handler and
    the others still run. Callbacks of pending ones run in kcore's one wakeup, not one each."""
    import contextvars

    var = contextvars.ContextVar("var", default="none")
    caught = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: caught.append(context["exception"]))
        result, kf = records(k, 1000)
        result.done(500, -1)
        wrap = futures_of(loop).wrap
        futures = [wrap(f) for f in kf]
        seen = []
        ctx = contextvars.copy_context()
        ctx.run(var.set, "mine")
        before = loop.handles
        futures[0].add_done_callback(lambda f: seen.append(("ctx", var.get())), context=ctx)
        futures[1].add_done_callback(lambda f: 1 / 0)
        for f in futures:
            f.add_done_callback(lambda f: seen.append(f.result().offset))
        assert seen == [] and loop.handles == before + 1  # soon, one Handle for all
        metas = await asyncio.gather(*futures)
        assert [m.offset for m in metas] == list(range(500, 1500))
        assert seen == [("ctx", "mine")] + list(range(500, 1500))
        assert len(caught) == 1 and isinstance(caught[0], ZeroDivisionError)
        pending_result, pending = records(k, 100)
        waits = [wrap(f) for f in pending]
        gathered = asyncio.gather(*waits)
        await asyncio.sleep(0)
        before = loop.handles
        in_thread(lambda: pending_result.done(0, -1))
        assert [m.offset for m in await gathered] == list(range(100))
        assert loop.handles - before < 10  # not one per record
    loop = SoonCountingLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    gone = weakref.ref(loop)
    del loop
    caught.clear()  # its traceback holds the loop
    gc.collect()
    assert gone() is None  # the loop's batch of callbacks does not keep it
