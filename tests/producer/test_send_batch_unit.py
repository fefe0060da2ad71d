"""send_batch without a broker: the aggregate future, input checks."""
import threading

import pytest

from pyprod.errors import BatchDeliveryError, KafkaTimeoutError, MessageSizeTooLargeError

IMPL = None


@pytest.fixture(autouse=True)
def _impl(k):
    global IMPL
    IMPL = k


def test_batch_future_succeeds_once_everything_completed():
    f = IMPL.BatchFuture("t", 5)
    seen = []
    f.add_callback(seen.append)
    f.add_pending(3)
    f.range_done(1, 0, 2)
    f.add_pending(2)
    f.record_done(4, 2)
    assert not f.is_done
    with pytest.raises(KafkaTimeoutError):
        f.get(timeout=0.01)
    f.range_done(1, 2, 1)
    f.record_done(3, 0)
    assert not f.is_done  # not sealed: more records may come
    f.seal()
    assert f.is_done and f.succeeded() and not f.failed()
    md = f.get(0)
    assert md == IMPL.BatchMetadata("t", 5, {0: 1, 1: 3, 2: 1})
    assert seen == [md] and f.value == md and f.exception is None
    late = []
    f.add_both(late.append)
    assert late == [md]


def test_batch_future_failures_by_index():
    parts = [0, 1, 0, 1, 0, -1]

    def locate(ranges):  # what the send path does: rank within the partition -> index
        out = []
        for p, rank, count, error, record_errors in ranges:
            idx = [i for i, q in enumerate(parts) if q == p][rank:rank + count]
            for r, i in enumerate(idx, rank):
                exc = error if error is not None else (record_errors or {}).get(r)
                if exc is not None:
                    out.append((i, exc))
        return out

    f = IMPL.BatchFuture("t", 6, locate)
    errs = []
    f.add_errback(errs.append)
    f.add_pending(5)
    too_large = MessageSizeTooLargeError("big")
    f.fail_now(5, too_large)
    boom = KafkaTimeoutError("expired")
    f.range_done(0, 1, 2, boom)           # records 2 and 4
    f.range_done(0, 0, 1)                 # record 0 ok
    f.range_done(1, 0, 2, None, {1: ValueError("bad")})  # record 3 failed, 1 ok
    f.seal()
    assert f.failed() and not f.succeeded()
    e = f.exception
    assert isinstance(e, BatchDeliveryError) and errs == [e]
    assert [i for i, _ in e.failures] == [2, 3, 4, 5]
    assert e.failures[0][1] is boom and e.failures[3][1] is too_large
    assert e.failed_count == 4 and e.succeeded_count == 2
    assert "#2" in str(e) and "4 of 6" in str(e)
    with pytest.raises(BatchDeliveryError):
        f.get(1)


def test_batch_future_get_waits_for_another_thread():
    f = IMPL.BatchFuture("t", 1)
    f.add_pending(1)
    f.seal()
    threading.Timer(0.05, f.record_done, (0, 3)).start()
    assert f.get(timeout=10).partition_counts == {3: 1}


def test_empty_call_is_done_at_once():
    f = IMPL.BatchFuture("t", 0)
    f.seal()
    assert f.get(0) == IMPL.BatchMetadata("t", 0, {})
