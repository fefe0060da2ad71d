"""kcore's AioRecordFuture (pyprod.aio's RecordFuture) on both twins (fixtures ``k`` and
``futures_of``): asyncio's Future contract (cancel, exceptions, callback order, done before
await, a closed loop, many futures completing in one Sender pass), then on a real broker with
the records read back by kafka-python."""
import asyncio
import contextvars
import gc
import weakref

import pytest

from pyprod import errors
from pyprod.aio import AIOKafkaProducer, ProducerFenced
from tests.harness.readback import read_all_kafka_python

from test_aio_await_futures import CountingLoop, SoonCountingLoop, in_thread, records


def run(main, loop_type=CountingLoop):
    loop = loop_type()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()


def test_it_is_an_asyncio_future(k, futures_of):
    async def main(loop):
        result, (f,) = records(k, 1)
        fut = futures_of(loop).wrap(f)
        assert asyncio.isfuture(fut) and fut.get_loop() is loop
        assert asyncio.ensure_future(fut) is fut
        assert "pending" in repr(fut)
        shielded = asyncio.shield(fut)
        in_thread(lambda: result.done(7, -1))
        assert (await asyncio.wait_for(shielded, 5)).offset == 7
        assert "finished" in repr(fut) and fut.done() and not fut.cancelled()
        with pytest.raises(TypeError):
            type(fut)()
    run(main)


def test_cancel(k, futures_of):
    async def main(loop):
        result, (a, b) = records(k, 2)
        futures = futures_of(loop)
        fa, fb = futures.wrap(a), futures.wrap(b)
        seen = []
        fa.add_done_callback(lambda f: seen.append(("a", f.cancelled())))
        assert fa.cancel() and fa.cancelled() and fa.done()
        assert not fa.cancel()
        assert seen == []  # soon, as asyncio's
        await asyncio.sleep(0)
        assert seen == [("a", True)]
        for call in (fa.result, fa.exception):
            with pytest.raises(asyncio.CancelledError):
                call()
        with pytest.raises(asyncio.CancelledError):
            await fa
        in_thread(lambda: result.done(0, -1))
        assert (await fb).offset == 1
        assert not fb.cancel()  # done: stays done
        await asyncio.sleep(0)
        assert seen == [("a", True)]  # the batch's completion does not run them again
        assert a.get().offset == 0  # the record itself was not stopped
    run(main)


def test_exceptions_translated_per_record(k, futures_of):
    async def main(loop):
        futures = futures_of(loop)
        result, (ok, bad) = records(k, 2)
        fok, fbad = futures.wrap(ok), futures.wrap(bad)
        waiting = asyncio.gather(fok, fbad, return_exceptions=True)
        await asyncio.sleep(0)
        in_thread(lambda: result.done(10, -1, None, {1: errors.InvalidRecordError("bad")}))
        meta, exc = await waiting
        assert meta.offset == 10 and fok.exception() is None
        assert fbad.exception() is exc and "bad" in str(exc)
        with pytest.raises(type(exc)):
            fbad.result()
        fenced, (f,) = records(k, 1)
        ff = futures.wrap(f)
        fenced.done(-1, -1, errors.InvalidProducerEpochError())
        assert isinstance(ff.exception(), ProducerFenced)
        with pytest.raises(ProducerFenced):
            await ff
    run(main)


def test_callbacks_in_order_and_removed(k, futures_of):
    """Callbacks run in the order added, also one added after the batch completed but before
    the loop ran its wakeup; each in its context; remove_done_callback counts what it took."""
    var = contextvars.ContextVar("var", default="none")

    async def main(loop):
        result, (f,) = records(k, 1)
        fut = futures_of(loop).wrap(f)
        seen = []
        fut.add_done_callback(lambda _: seen.append(1))
        gone = seen.append
        fut.add_done_callback(gone)
        fut.add_done_callback(gone)
        ctx = contextvars.copy_context()
        ctx.run(var.set, "mine")
        fut.add_done_callback(lambda _: seen.append(var.get()), context=ctx)
        assert fut.remove_done_callback(gone) == 2 and fut.remove_done_callback(gone) == 0
        in_thread(lambda: result.done(0, -1))
        assert fut.done()  # the Sender's pass: done, callbacks not run yet
        fut.add_done_callback(lambda _: seen.append(3))
        assert seen == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert seen == [1, "mine", 3]
        fut.add_done_callback(lambda _: seen.append(4))  # done and woken: soon
        assert fut.remove_done_callback(seen.append) == 0
        await asyncio.sleep(0)
        assert seen == [1, "mine", 3, 4]
    run(main)


def test_done_before_await_wakes_nothing(k, futures_of):
    async def main(loop):
        result, fs = records(k, 3)
        result.done(100, 55)
        futures = futures_of(loop)
        metas = [await futures.wrap(f) for f in fs]
        assert [m.offset for m in metas] == [100, 101, 102]
        assert {(m.timestamp, m.timestamp_type, m.log_start_offset) for m in metas} == {
            (55, 1, None)}
        fut = futures.wrap(fs[0])
        assert fut.result() == metas[0] and fut.result() is fut.result()
        assert await futures_of(loop, no_ack=True).wrap(fs[1]) is None
        return loop.wakeups
    assert run(main) == 0


def test_result_before_done(k, futures_of):
    async def main(loop):
        _, (f,) = records(k, 1)
        fut = futures_of(loop).wrap(f)
        for call in (fut.result, fut.exception):
            with pytest.raises(asyncio.InvalidStateError):
                call()
    run(main)


def test_batch_future_waits_for_its_first_record(k, futures_of):
    """send_batch's future: done when its first and last records are, the first's metadata."""
    async def main(loop):
        first_batch, (first,) = records(k, 1, partition=0)
        last_batch, (last,) = records(k, 1, partition=1)
        fut = futures_of(loop).wrap(last, first)
        waiting = asyncio.ensure_future(fut)
        await asyncio.sleep(0)
        in_thread(lambda: last_batch.done(9, -1))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not fut.done() and not waiting.done()
        in_thread(lambda: first_batch.done(3, -1))
        meta = await waiting
        assert (meta.partition, meta.offset) == (0, 3)
    run(main)


def test_a_closed_loop(k, futures_of):
    """On a closed loop: add_done_callback raises as asyncio's does (and keeps nothing), and
    completing an awaited batch there raises nothing in the Sender's thread."""
    loop = asyncio.new_event_loop()
    futures = futures_of(loop)
    done_result, (d,) = records(k, 1)
    done_result.done(0, -1)
    pending_result, (p,) = records(k, 1)
    waiting = futures.wrap(p)
    waiting.add_done_callback(lambda _: None)
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        futures.wrap(d).add_done_callback(lambda _: None)
    with pytest.raises(RuntimeError, match="closed"):  # again: the first call left nothing
        futures.wrap(d).add_done_callback(lambda _: None)
    in_thread(lambda: pending_result.done(5, -1))
    assert waiting.done() and waiting.result().offset == 5


def test_many_futures_completing_at_once(k, futures_of):
    """20 batches of 500 records completed in one Sender pass: one wakeup, a few Handles for
    10,000 gathered futures, every result right."""
    class Loop(CountingLoop, SoonCountingLoop):
        pass

    async def main(loop):
        batches = [records(k, 500, partition=p) for p in range(20)]
        wrap = futures_of(loop).wrap
        futures = [wrap(f) for _, fs in batches for f in fs]
        gathered = asyncio.gather(*futures)
        await asyncio.sleep(0)
        handles, wakeups = loop.handles, loop.wakeups
        in_thread(lambda: [r.done(p * 1000, -1) for p, (r, _) in enumerate(batches)])
        metas = await gathered
        assert [(m.partition, m.offset) for m in metas] == [
            (p, p * 1000 + i) for p in range(20) for i in range(500)]
        assert loop.wakeups - wakeups == 1 and loop.handles - handles < 10
    run(main, Loop)


def test_gathered_windows_on_a_broker_read_back(kafka, topic):
    """bench/aio.py's shape on a real broker (a window gathered behind, a callback on some,
    a cancelled future's record still sent), every record read back at its metadata."""
    name = topic(3)
    n = 3000

    async def main():
        called = []
        async with AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                                    linger_ms=5) as p:
            futures, metas = [], []
            for i in range(n):
                fut = await p.send(name, b"v%d" % i)
                if i % 100 == 0:
                    fut.add_done_callback(lambda f, i=i: called.append((i, f.result().offset)))
                futures.append(fut)
                if len(futures) % 500 == 0:
                    metas += await asyncio.gather(*futures[len(metas):len(futures) - 250])
            cancelled = await p.send(name, b"cancelled")
            cancelled.cancel()
            metas += await asyncio.gather(*futures[len(metas):])
            await p.flush()
        return metas, dict(called)
    metas, called = asyncio.run(asyncio.wait_for(main(), 60))
    got = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=n + 1)
    where = {r.value: (r.partition, r.offset) for r in got}
    assert len(got) == n + 1 and b"cancelled" in where
    assert [(m.partition, m.offset) for m in metas] == [where[b"v%d" % i] for i in range(n)]
    assert called == {i: metas[i].offset for i in range(0, n, 100)}


def test_nothing_kept_by_a_loop_closed_before_its_callbacks_ran(k, futures_of):
    """Callbacks of done futures pending when the loop is closed, and a failed future whose
    exception's traceback refers back to it: all collected (with the loop)."""
    loop = asyncio.new_event_loop()
    result, (f, g) = records(k, 2)
    result.done(-1, -1, errors.InvalidRecordError("bad"))
    futures = futures_of(loop)
    pending, failed = futures.wrap(f), futures.wrap(g)

    async def fail(fut):
        try:
            await fut
        except errors.InvalidRecordError as exc:
            return exc
    assert loop.run_until_complete(fail(failed)).__traceback__ is not None
    pending.add_done_callback(lambda fut: None)
    loop.close()
    refs = [weakref.ref(o) for o in (loop, pending, failed)]
    del loop, futures, pending, failed
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_each_callback_runs_in_a_copy_of_its_context_when_added(k, futures_of):
    """As asyncio's: a callback sees the context as it was when it was added (a set() between
    two adds shows in the second only), and what one sets is not seen by the next one nor by
    the code that added them; for done and pending futures."""
    var = contextvars.ContextVar("var", default=0)

    async def main(loop):
        futures = futures_of(loop)
        done_result, done = records(k, 4)
        done_result.done(0, -1)
        pending_result, pending = records(k, 4)
        seen = []

        def callback(fut):
            seen.append(var.get())
            var.set(99)
        for group in (done, pending):
            for i, f in enumerate(group):
                if i == 2:
                    var.set(var.get() + 1)
                futures.wrap(f).add_done_callback(callback)
        in_thread(lambda: pending_result.done(0, -1))
        for _ in range(3):
            await asyncio.sleep(0)
        assert seen == [0, 0, 1, 1, 1, 1, 2, 2] and var.get() == 2
    run(main)
