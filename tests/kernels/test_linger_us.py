"""Linger timed to the microsecond, on both implementations: a batch keeps its creation's
microseconds (created_frac_us), and ready()/ready_drain() given the Sender's time in
microseconds (now_us) wait exactly linger_ms from it, with the next delay in fractional ms;
given only ms they decide, and round the delay, as when linger was timed in whole ms."""
import pytest

from test_batch_growth import _paths, _send
from test_record_accumulator import FakeMetadata

LINGER_MS = 5


@pytest.fixture
def batch_and_acc(k):
    acc, sp, _ = _paths(k, linger_ms=LINGER_MS)
    _send(sp, 1)
    batch = acc.topic_info("t").deques[0][0]
    return batch, acc


def test_a_new_batch_keeps_its_creation_microseconds(k, batch_and_acc):
    batch, _ = batch_and_acc
    assert 0 <= batch.created_frac_us <= 999 and batch.last_attempt_ms == batch.created_ms
    now_us = k.NetworkPoll.now_us()
    assert batch.created_ms * 1000 + batch.created_frac_us <= now_us
    assert k.ProducerBatch(("t", 0), 1024, None, 7).created_frac_us == 0  # given ms only


def test_linger_counts_from_the_microsecond_the_batch_began(batch_and_acc):
    batch, acc = batch_and_acc
    cluster = FakeMetadata().cluster
    due = (batch.created_ms + LINGER_MS) * 1000 + batch.created_frac_us
    early = acc.ready(cluster, (due - 250) // 1000, now_us=due - 250)
    assert early.ready_nodes == set() and early.next_ready_check_delay_ms == pytest.approx(0.25)
    assert acc.ready(cluster, due // 1000, now_us=due).ready_nodes == {0}
    result, drained = acc.ready_drain(cluster, (due - 1) // 1000, (), [0], 1 << 20,
                                      now_us=due - 1)
    assert result.ready_nodes == set() and drained == {}
    assert result.next_ready_check_delay_ms == pytest.approx(0.001)
    result, drained = acc.ready_drain(cluster, due // 1000, (), [0], 1 << 20, now_us=due)
    assert result.ready_nodes == {0} and [b.record_count for b in drained[0]] == [1]


def test_given_ms_only_linger_is_timed_in_whole_ms(batch_and_acc):
    batch, acc = batch_and_acc
    cluster = FakeMetadata().cluster
    t0 = batch.created_ms
    for waited in range(LINGER_MS):  # whatever the creation's microseconds
        result = acc.ready(cluster, t0 + waited)
        assert result.ready_nodes == set()
        assert result.next_ready_check_delay_ms == LINGER_MS - waited  # whole ms, as before
        assert type(result.next_ready_check_delay_ms) is int
    assert acc.ready(cluster, t0 + LINGER_MS).ready_nodes == {0}


def test_a_retried_batch_backs_off_in_whole_ms(batch_and_acc):
    batch, acc = batch_and_acc
    cluster = FakeMetadata().cluster
    drained = acc.drain(cluster, {0}, 1 << 20, batch.created_ms + LINGER_MS)[0]
    retry_at = batch.created_ms + LINGER_MS + 1
    acc.reenqueue(drained[0], retry_at)
    backoff = acc.retry_backoff_ms
    late = (retry_at + backoff) * 1000 - 1  # the creation's microseconds play no part
    waiting = acc.ready(cluster, late // 1000, now_us=late)
    assert waiting.ready_nodes == set()
    assert waiting.next_ready_check_delay_ms == pytest.approx(0.001)
    assert acc.ready(cluster, retry_at + backoff, now_us=(retry_at + backoff) * 1000
                     ).ready_nodes == {0}
