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
