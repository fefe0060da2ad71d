"""Faults injected with librdkafka's mock cluster: produce errors, broker outages, leader moves,
latency and sequence errors. Whatever happens, every future completes once, its callback or
errback fires once, every acknowledged record is in the log at the offset it was given, keyed
records keep their order, and an idempotent producer writes nothing twice.

The mock checks producer sequences only for transactional producers: for an idempotent one it
neither refuses a batch that overtook a retried one (a real broker answers
OUT_OF_ORDER_SEQUENCE_NUMBER, and the batch is retried in order) nor drops a resent duplicate.
So order is checked where no batch can overtake another on the mock (one request in flight, or
faults that fail every request in flight), and a resend of a batch the mock already wrote shows
up twice (real-broker deduplication is in test_idempotence.py)."""
import collections
import threading
import time

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.mock_cluster import ApiKey, Err
from tests.harness.readback import read_all_confluent

KEYS = 11
WAIT = 60  # bound on every flush/close/read in these tests (seconds)


def _topic(mc, name, partitions=6):
    """A topic with known leaders: partition p on broker 1 + p % 3."""
    mc.topic_create(name, partitions, 3)
    for p in range(partitions):
        mc.partition_set_leader(name, p, 1 + p % 3)
    return name


def _producer(mc, **config):
    config.setdefault("linger_ms", 5)
    config.setdefault("retry_backoff_ms", 50)
    config.setdefault("reconnect_backoff_max_ms", 500)
    config.setdefault("request_timeout_ms", 5000)
    return KafkaProducer(bootstrap_servers=mc.bootstrap_servers, **config)


class Stream:
    """Sends records value=b"<i>", key=b"k<i % KEYS>" and counts every callback."""

    def __init__(self, producer, topic):
        self.producer, self.topic = producer, topic
        self.futures = []
        self.calls = collections.Counter()
        self._lock = threading.Lock()

    def _ok(self, i, _metadata):
        with self._lock:
            self.calls[i] += 1

    def _err(self, i, _exc):
        with self._lock:
            self.calls[i] -= 1000  # an errback: counted apart from callbacks

    def send(self, n, faults=None, pace=20):
        """Send n more records; faults: {index in this call: action()} run inline mid-stream.
        Every `pace` records the stream pauses 5 ms, so faults land while data flows."""
        faults = faults or {}
        for j in range(n):
            if j in faults:
                faults[j]()
            i = len(self.futures)
            f = self.producer.send(self.topic, b"%d" % i, key=b"k%d" % (i % KEYS))
            f.add_callback(self._ok, i).add_errback(self._err, i)
            self.futures.append(f)
            if pace and j % pace == pace - 1:
                time.sleep(0.005)

    def flush(self):
        self.producer.flush(timeout=WAIT)

    @property
    def acked(self):
        return [i for i, f in enumerate(self.futures) if f.succeeded()]

    @property
    def failed(self):
        return [i for i, f in enumerate(self.futures) if f.failed()]

    def check(self, mc, unique="all", ordered=True):
        """The invariants every scenario keeps; returns what was read back.

        unique: "all" (nothing written twice), "acked" (no acknowledged record twice) or None.
        """
        assert all(f.is_done for f in self.futures), "a future never completed"
        for i, f in enumerate(self.futures):  # exactly one callback or errback per record
            assert self.calls[i] == (1 if f.succeeded() else -1000), (i, self.calls[i], f)
        acked = self.acked
        read = read_all_confluent(mc.bootstrap_servers, self.topic, len(acked), timeout=WAIT)
        counts = collections.Counter(int(r.value) for r in read)
        if unique:
            dups = [v for v, c in counts.items() if c > 1 and (unique == "all" or
                                                               self.futures[v].succeeded())]
            assert not dups, "written twice: %s" % sorted(dups)[:10]
        missing = [i for i in acked if i not in counts]
        assert not missing, "acknowledged but missing: %s" % missing[:10]
        at = {(r.partition, r.offset): int(r.value) for r in read}
        for i in acked:
            md = self.futures[i].value
            if md.offset >= 0:  # -1 only for a DUPLICATE_SEQUENCE_NUMBER answer
                assert at[(md.partition, md.offset)] == i, "wrong offset for %d: %s" % (i, md)
        if ordered:
            by_key = collections.defaultdict(list)
            for r in read:  # sorted by (partition, offset)
                by_key[r.key].append(int(r.value))
            for key, vals in by_key.items():
                assert vals == sorted(vals), "order broken for %r: %s" % (key, vals[:20])
        return read


def _count(mc, api_key):
    return sum(1 for _, key, _ in mc.get_requests() if key == api_key)


# -- produce errors ----------------------------------------------------------------------------

MODES = {  # name: (producer config, checks)
    "idempotent": ({"max_in_flight_requests_per_connection": 1}, {}),
    "idempotent-5-in-flight": ({}, {"ordered": False}),  # see the module docstring
    "acks1": ({"enable_idempotence": False, "acks": 1,
               "max_in_flight_requests_per_connection": 1}, {"unique": None}),
}


@pytest.mark.parametrize("error", [Err.NOT_LEADER_FOR_PARTITION, Err.REQUEST_TIMED_OUT],
                         ids=["not_leader", "request_timed_out"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_retriable_produce_errors_mid_stream(mock_cluster, error, mode):
    mc = mock_cluster
    name = _topic(mc, "errors")
    config, checks = MODES[mode]
    with _producer(mc, **config) as p:
        s = Stream(p, name)
        s.send(300)
        s.flush()
        mc.start_request_tracking()
        s.send(2000, faults={500: lambda: mc.push_request_errors(ApiKey.Produce, [error] * 6)})
        s.flush()
        metadata_requests = _count(mc, ApiKey.Metadata)
    assert not s.failed, s.futures[s.failed[0]].exception
    assert len(s.check(mc, **checks)) == len(s.futures)  # the broker wrote no failed attempt
    if error == Err.NOT_LEADER_FOR_PARTITION:  # an invalid-metadata error refreshes metadata
        assert metadata_requests >= 1


def test_retries_wait_retry_backoff(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "backoff", partitions=1)
    with _producer(mc, retry_backoff_ms=300, linger_ms=0) as p:
        p.send(name, b"warm", key=b"w").get(timeout=WAIT)
        mc.push_request_errors(ApiKey.Produce, [Err.NOT_LEADER_FOR_PARTITION] * 3)
        start = time.monotonic()
        md = p.send(name, b"x", key=b"w").get(timeout=WAIT)
        elapsed = time.monotonic() - start
    assert md.offset == 1
    assert elapsed >= 3 * 0.3 * 0.95  # three retries, each after the backoff


def test_retries_exhausted_fail_once(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "exhausted", partitions=1)
    with _producer(mc, enable_idempotence=False, acks=1, retries=2) as p:
        s = Stream(p, name)
        s.send(1, pace=0)
        s.flush()
        mc.push_request_errors(ApiKey.Produce, [Err.NOT_ENOUGH_REPLICAS] * 3)
        s.send(20, pace=0)
        s.flush()
        s.send(20, pace=0)
        s.flush()
    assert all(isinstance(s.futures[i].exception, errors.NotEnoughReplicasError)
               for i in s.failed)
    assert s.failed == list(range(1, 21))  # the second batch gave up after 2 retries
    s.check(mc, unique=None)


# -- broker outages and leader moves -----------------------------------------------------------

@pytest.mark.parametrize("mode", ["idempotent-5-in-flight", "acks1"])
def test_broker_down_and_up_mid_stream(mock_cluster, mode):
    mc = mock_cluster
    name = _topic(mc, "down")
    config, checks = MODES[mode]
    with _producer(mc, **config) as p:
        s = Stream(p, name)
        s.send(3000, faults={800: lambda: mc.broker_set_down(2),
                             2200: lambda: mc.broker_set_up(2)})
        s.flush()
    assert not s.failed, s.futures[s.failed[0]].exception
    s.check(mc, unique=checks.get("unique", "all"))  # outages fail every request in flight


def test_all_brokers_down_then_up(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "alldown")
    with _producer(mc) as p:
        s = Stream(p, name)
        s.send(500)
        mc.broker_set_down(-1)
        s.send(500)
        time.sleep(1.0)  # records pile up while nothing is reachable
        mc.broker_set_up(-1)
        s.send(500)
        s.flush()
    assert not s.failed, s.futures[s.failed[0]].exception
    assert len(s.check(mc)) == len(s.futures)


def test_broker_down_past_delivery_timeout(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "expire", partitions=3)
    with _producer(mc, request_timeout_ms=1000, delivery_timeout_ms=2000, linger_ms=0) as p:
        s = Stream(p, name)
        s.send(300)
        s.flush()
        mc.broker_set_down(2)  # leads partition 1
        s.send(300)
        s.flush()  # bounded: everything for broker 2 expires after delivery_timeout_ms
        expired = list(s.failed)
        mc.broker_set_up(2)
        s.send(300)
        s.flush()
    assert expired and all(s.futures[i].value is None for i in expired)
    assert all(isinstance(s.futures[i].exception, errors.KafkaTimeoutError) for i in expired)
    assert {s.futures[i].value.partition for i in s.acked if i >= 600} == {0, 1, 2}
    s.check(mc)


@pytest.mark.parametrize("mode", ["idempotent-5-in-flight", "acks1"])
def test_leader_moved_mid_stream(mock_cluster, mode):
    mc = mock_cluster
    name = _topic(mc, "moved")
    config, checks = MODES[mode]

    def move(shift):
        return lambda: [mc.partition_set_leader(name, q, 1 + (q + shift) % 3) for q in range(6)]

    with _producer(mc, **config) as p:
        s = Stream(p, name)
        s.send(3000, faults={700: move(1), 1500: move(2)})
        s.flush()
    assert not s.failed, s.futures[s.failed[0]].exception
    leaders = {(s.futures[i].value.partition, i >= 1500) for i in s.acked}
    assert len(leaders) == 12  # every partition got data before and after the moves
    s.check(mc, unique=checks.get("unique", "all"))  # the old leader refuses every request


# -- latency -----------------------------------------------------------------------------------

def test_rtt_below_request_timeout_delivers(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "rtt")
    for broker in (1, 2, 3):
        mc.broker_set_rtt(broker, 300)
    with _producer(mc, request_timeout_ms=3000) as p:
        s = Stream(p, name)
        start = time.monotonic()
        s.send(1500)
        s.flush()
        elapsed = time.monotonic() - start
    assert not s.failed, s.futures[s.failed[0]].exception
    assert elapsed >= 0.3  # every answer waits for the rtt
    assert len(s.check(mc)) == len(s.futures)


def test_rtt_above_request_timeout_times_out_then_recovers(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "slow")
    with _producer(mc, request_timeout_ms=200, delivery_timeout_ms=1500, linger_ms=0) as p:
        s = Stream(p, name)
        s.send(300)
        s.flush()
        for broker in (1, 2, 3):
            mc.broker_set_rtt(broker, 300)
        s.send(300)
        s.flush()  # nothing can be answered in time: all of it times out
        slow = list(range(300, 600))
        for broker in (1, 2, 3):
            mc.broker_set_rtt(broker, 0)
        s.send(300)
        s.flush()
    assert set(s.failed) == set(slow)
    for i in slow:
        assert isinstance(s.futures[i].exception,
                          (errors.KafkaTimeoutError, errors.RequestTimedOutError)), \
            s.futures[i].exception
    assert all(s.futures[i].succeeded() for i in range(600, 900))
    s.check(mc, unique="acked")  # the mock wrote each timed-out attempt (see module doc)


# -- idempotence errors ------------------------------------------------------------------------

def test_out_of_order_sequence_is_fatal_for_the_batch(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "oos", partitions=1)
    with _producer(mc, linger_ms=20) as p:
        s = Stream(p, name)
        s.send(100, pace=0)
        s.flush()
        mc.start_request_tracking()
        mc.push_request_errors(ApiKey.Produce, [Err.OUT_OF_ORDER_SEQUENCE_NUMBER])
        s.send(100, pace=0)
        s.flush()
        failed = list(s.failed)
        s.send(100, pace=0)  # the producer recovered: epoch + 1 (KIP-360), sequences from 0
        s.flush()
        init_pid_requests = _count(mc, ApiKey.InitProducerId)
        epoch = p._txn_partitions.producer_epoch
    assert failed and failed == s.failed and min(failed) >= 100
    for i in failed:
        assert isinstance(s.futures[i].exception, errors.OutOfOrderSequenceNumberError)
    assert init_pid_requests == 0 and epoch == 1  # bumped locally, as Java's producer does
    read = s.check(mc)
    assert not set(failed) & {int(r.value) for r in read}  # the broker refused them
    assert len(read) == 300 - len(failed)


def test_out_of_order_sequence_across_partitions(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "oos6")
    with _producer(mc) as p:
        s = Stream(p, name)
        s.send(3000, faults={1000: lambda: mc.push_request_errors(
            ApiKey.Produce, [Err.OUT_OF_ORDER_SEQUENCE_NUMBER] * 2)})
        s.flush()
        s.send(500)
        s.flush()
    assert s.failed
    for i in s.failed:
        assert isinstance(s.futures[i].exception, errors.OutOfOrderSequenceNumberError)
    assert all(s.futures[i].succeeded() for i in range(3000, 3500))
    s.check(mc)


def test_unknown_producer_id_is_retried_under_a_new_epoch(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "unknown_pid", partitions=2)
    with _producer(mc) as p:
        s = Stream(p, name)
        s.send(200)
        s.flush()
        mc.start_request_tracking()
        mc.push_request_errors(ApiKey.Produce, [Err.UNKNOWN_PRODUCER_ID])
        s.send(200)
        s.flush()
        init_pid_requests = _count(mc, ApiKey.InitProducerId)
        epoch = p._txn_partitions.producer_epoch
    assert not s.failed, s.futures[s.failed[0]].exception
    assert init_pid_requests == 0 and epoch == 1
    assert len(s.check(mc)) == 400


def test_duplicate_sequence_counts_as_success(mock_cluster):
    mc = mock_cluster
    name = _topic(mc, "dupseq", partitions=1)
    with _producer(mc, linger_ms=0) as p:
        p.send(name, b"0", key=b"k").get(timeout=WAIT)
        mc.push_request_errors(ApiKey.Produce, [Err.DUPLICATE_SEQUENCE_NUMBER])
        md = p.send(name, b"1", key=b"k").get(timeout=WAIT)
    assert md.offset == -1 and md.partition == 0  # "already written": no offset to report
