import threading

import pytest

from pyprod.errors import KafkaTimeoutError, MessageSizeTooLargeError

IMPL = None  # set per test by the autouse fixture: the compiled kcore or its pure twin


@pytest.fixture(autouse=True)
def _impl(k):
    global IMPL
    IMPL = k


def _futures(n):
    result = IMPL.ProduceRequestResult(IMPL.TopicPartition("t", 3))
    return result, [IMPL.FutureRecordMetadata(result, i, 1000 + i, 1, 2, -1) for i in range(n)]


def test_batch_completion_gives_each_record_its_offset():
    result, futures = _futures(3)
    assert not futures[0].is_done
    with pytest.raises(KafkaTimeoutError):
        futures[0].get(timeout=0.01)
    result.done(base_offset=100)
    md = [f.get(timeout=1) for f in futures]
    assert [m.offset for m in md] == [100, 101, 102]
    assert [m.timestamp for m in md] == [1000, 1001, 1002]
    assert md[0].topic_partition == ("t", 3) and md[0].serialized_header_size == -1
    assert all(f.succeeded() and not f.failed() for f in futures)


def test_log_append_time_wins():
    result, futures = _futures(1)
    result.done(base_offset=0, log_append_time=5)
    assert futures[0].get().timestamp == 5


def test_callbacks_fire_once_before_and_after_completion():
    result, futures = _futures(2)
    seen = []
    futures[0].add_callback(lambda m: seen.append(("cb", m.offset)))
    futures[0].add_errback(lambda e: seen.append(("eb", e)))
    result.done(base_offset=7)
    result.done(base_offset=99)  # ignored: a batch completes once
    futures[1].add_callback(lambda tag, m: seen.append((tag, m.offset)), "late")  # args first, as kafka-python
    assert seen == [("cb", 7), ("late", 8)]


def test_errors_reach_errbacks_and_get():
    result, futures = _futures(2)
    seen = []
    futures[0].add_both(seen.append)
    result.done(error=MessageSizeTooLargeError("big"))
    assert isinstance(seen[0], MessageSizeTooLargeError)
    with pytest.raises(MessageSizeTooLargeError):
        futures[1].get()
    assert futures[1].failed() and futures[1].value is None


def test_per_record_errors():
    result, futures = _futures(2)
    result.done(base_offset=0, record_errors={1: MessageSizeTooLargeError("x")})
    assert futures[0].succeeded() and futures[1].failed()


def _record_calls(futures, seen):
    """Interleaved registrations on every record: c/e tagged with the record and their rank."""
    for i, f in enumerate(futures):
        f.add_errback(lambda e, i=i: seen.append(("e1", i)))
        f.add_callback(lambda m, i=i: seen.append(("c1", i, m.offset)))
    for i, f in enumerate(futures):
        f.add_callback(lambda m, i=i: seen.append(("c2", i)))
        f.add_both(lambda x, i=i: seen.append(("b", i)))
        f.add_errback(lambda tag, e, i=i: seen.append((tag, i)), "e2")


def test_callbacks_run_per_record_in_registration_order():
    result, futures = _futures(3)
    seen = []
    _record_calls(futures, seen)
    result.done(base_offset=10, record_errors={1: MessageSizeTooLargeError("x")})
    assert seen == [("c1", 0, 10), ("e1", 1), ("c1", 2, 12),
                    ("c2", 0), ("b", 0), ("b", 1), ("e2", 1), ("c2", 2), ("b", 2)]
    result, futures = _futures(2)
    seen.clear()
    _record_calls(futures, seen)
    result.done(error=MessageSizeTooLargeError("all"))
    assert seen == [("e1", 0), ("e1", 1), ("b", 0), ("e2", 0), ("b", 1), ("e2", 1)]


def test_callback_gets_the_records_metadata_and_keyword_arguments():
    result, futures = _futures(2)
    seen = []
    for f in futures:
        f.add_callback(lambda m, tag=None: seen.append((tag, m)), tag="kw")
    result.done(base_offset=3)
    assert [m.offset for _, m in seen] == [3, 4] and {t for t, _ in seen} == {"kw"}
    assert seen[0][1] is futures[0].get() and type(seen[0][1]) is IMPL.RecordMetadata
    assert seen[1][1] == IMPL.RecordMetadata("t", 3, ("t", 3), 4, 1001, None, 1, 2, -1)


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog):
    result, futures = _futures(2)
    seen = []

    def boom(m):
        raise RuntimeError("user bug")
    futures[0].add_callback(boom).add_callback(seen.append).add_errback(seen.append)
    futures[1].add_callback(seen.append)
    with caplog.at_level("ERROR", logger="kcore.future"):
        result.done(base_offset=0)
    assert [m.offset for m in seen] == [0, 1]
    logged = [r for r in caplog.records if r.getMessage().startswith("Error in producer callback")]
    assert len(logged) == 1 and "user bug" in str(logged[0].exc_info[1])
    futures[1].add_callback(boom)  # late: runs now, in the caller, and is logged too
    assert len([r for r in caplog.records if r.exc_info]) == 2


def test_callbacks_of_a_split_batch_get_each_pieces_offsets():
    result, futures = _futures(4)
    seen = []
    for f in futures:
        f.add_callback(lambda m: seen.append(m.offset))
    first, second = (IMPL.ProduceRequestResult(IMPL.TopicPartition("t", 3)) for _ in range(2))
    result.pieces = [(0, 2, first), (2, 2, second)]
    first.done(base_offset=50)
    second.done(base_offset=80)
    result.done(base_offset=50)
    assert seen == [50, 51, 80, 81]


def test_a_callback_holding_its_future_is_freed_once_the_batch_is_done():
    """Compiled futures are not tracked by the GC: the cycle through the callback is broken
    by done(), so reference counting alone frees it."""
    import gc
    freed = []

    class Holder:
        def __init__(self, future):
            self.future = future

        def __call__(self, metadata):
            pass

        def __del__(self):
            freed.append(True)
    result, futures = _futures(1)
    futures[0].add_callback(Holder(futures[0]))
    gc.disable()
    try:
        result.done(base_offset=0)
        assert freed == [True]
    finally:
        gc.enable()


def test_get_wakes_when_another_thread_completes():
    result, futures = _futures(1)
    t = threading.Timer(0.05, result.done, kwargs={"base_offset": 1})
    t.start()
    assert futures[0].get(timeout=10).offset == 1
    t.join()


class _CompletesWhenCollected:
    """Completes `result` from a finalizer: the GC runs it on some allocation, which is where
    another thread may take the GIL in between (the Sender completing the batch)."""

    def __init__(self, result):
        self.result, self.cycle = result, self

    def __del__(self):
        self.result.done(base_offset=7)


@pytest.mark.parametrize("registered_before", [False, True])
def test_callback_registered_while_the_gc_completes_the_batch(registered_before):
    import gc
    seen = []
    for _ in range(200):
        result, futures = _futures(2)
        if registered_before:
            futures[1].add_callback(seen.append)
        _CompletesWhenCollected(result)
        add, future, callback = result.add_thunk, futures[0], seen.append
        old = gc.get_threshold()
        gc.set_threshold(1)
        try:
            added = add(future, callback, None)
        finally:
            gc.set_threshold(*old)
        gc.collect()
        assert result.is_done
        if not added:
            callback(future)  # what FutureRecordMetadata does when the batch was done
    # every callback ran exactly once, whichever side won
    assert len(seen) == 200 * (2 if registered_before else 1)
