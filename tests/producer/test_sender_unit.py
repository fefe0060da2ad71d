"""The Sender without a network: a scripted NetworkClient, a fake clock, the real accumulator
(both implementations) and TxnPartitionMap. Poll timeouts, expiry in the queue and in flight,
retries and the idempotence error paths, all deterministic."""
import pytest

from pyprod import config as configuration
from pyprod import errors
from pyprod import sender as sender_module
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.protocol import init_producer_id, produce
from pyprod.producer import accumulator_settings, sender_for
from tests.harness.fake_metadata import ListenedVersion
from kcore import TxnPartitionMap

T0 = 1_000_000
PRODUCE_V = 9
INIT_PID_V = 4


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


class FakeMetadata(ListenedVersion):
    def __init__(self, leader=0, partitions=2):
        self.version = 1
        self.updates = 0
        self.set_leader(leader, partitions)

    def set_leader(self, leader, partitions=2):
        parts = {i: PartitionInfo("t", i, leader, 0, [0], [0], []) for i in range(partitions)}
        self.cluster = Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, {"t": parts})
        self.version += 1

    def add_topic(self, topic, now=None):
        return False

    def request_update(self):
        self.updates += 1
        return self.version


class Request:
    def __init__(self, api_key, body, callback, expects_response):
        if isinstance(body, list):  # the NetworkClient takes a body as a list of buffers
            body = b"".join(bytes(b) for b in body)
        self.api_key, self.body, self.callback = api_key, body, callback
        self.expects_response = expects_response

    def batches(self):
        """[(partition, producer id, base sequence, record count)] of a Produce request."""
        req = produce.API.decode_request(PRODUCE_V, self.body)
        out = []
        for topic in req.topic_data:
            for part in topic.partition_data:
                rec = bytes(part.records)
                out.append((part.index, int.from_bytes(rec[43:51], "big", signed=True),
                            int.from_bytes(rec[53:57], "big", signed=True),
                            int.from_bytes(rec[57:61], "big")))
        return out


class Response:
    def __init__(self, body=None, error=None):
        self.body, self.error = body, error
        self.latency_ms = 1  # as kcore's ClientResponse (the metrics count it)


class FakeClient:
    """Ready node 0; requests are kept until the test answers them."""

    network_poll = None  # the SenderLoop's NetworkPoll: FakeNet below

    def __init__(self):
        self.requests = []
        self.polls = []
        self.ready_nodes = {0}
        self.next_pid = 1000

    def ready(self, node, now):
        return node in self.ready_nodes

    def authentication_error(self, node):
        return None

    def connection_delay(self, node, now):
        return 50

    def least_loaded_node(self, now):
        return 0 if self.ready_nodes else None

    def api_version(self, node, api_key):
        return PRODUCE_V if api_key == produce.API_KEY else INIT_PID_V

    def send(self, node, api_key, version, body, expects_response=True, callback=None,
             timeout_ms=None):
        self.requests.append(Request(api_key, body, callback, expects_response))

    def poll(self, timeout_ms):
        self.polls.append(timeout_ms)

    def wakeup(self):
        pass

    def in_flight_request_count(self, node=None):
        return len(self.requests)

    def busy_nodes(self):
        return {0} if self.requests else set()

    def close(self):
        pass

    # -- answering --
    def take(self, api_key=produce.API_KEY):
        found = [r for r in self.requests if r.api_key == api_key]
        for r in found:
            self.requests.remove(r)
        return found

    def answer_init_pid(self):
        (req,) = self.take(init_producer_id.API_KEY)
        body = init_producer_id.API.encode_response(INIT_PID_V, {
            "throttle_time_ms": 0, "error_code": 0, "producer_id": self.next_pid,
            "producer_epoch": 0})
        self.next_pid += 1
        req.callback(Response(body))

    @staticmethod
    def answer(req, codes, base_offset=0):
        """codes: {partition: error code} (missing: 0)."""
        parts = [{"index": p, "error_code": codes.get(p, 0), "base_offset": base_offset,
                  "log_append_time_ms": -1, "log_start_offset": 0, "record_errors": [],
                  "error_message": None} for p, *_ in req.batches()]
        body = produce.API.encode_response(PRODUCE_V, {
            "responses": [{"name": "t", "partition_responses": parts}],
            "throttle_time_ms": 0})
        req.callback(Response(body))


class FakeNet:
    """The SenderLoop's way to its client (a NetworkPoll), on FakeClient's Python API and the
    fake clock."""

    def __init__(self, client, clock):
        self.client, self.now_ms = client, clock

    def now_us(self):  # the fake clock's ms, to the microsecond (Rig.send's batches' times)
        return self.now_ms() * 1000

    def poll(self, timeout_ms):
        self.client.poll(timeout_ms)

    def busy_nodes(self):
        return self.client.busy_nodes()

    def sendable_nodes(self, now):
        return sorted(n for n in self.client.ready_nodes if self.client.ready(n, now))

    def ready_delay(self, node):
        return None  # not READY: the client's own ready() and connection_delay() decide

    def produce_version(self, node):
        return self.client.api_version(node, produce.API_KEY)

    def send_request(self, node, api_key, version, body, expects_response, callback,
                     timeout_ms):
        self.client.send(node, api_key, version, body, expects_response, callback, timeout_ms)


class Rig:
    def __init__(self, k, monkeypatch, idempotent=True, **configs):
        self.clock = Clock()
        monkeypatch.setattr(sender_module, "now_ms", self.clock)
        configs.setdefault("linger_ms", 0)
        self.config = configuration.build(enable_idempotence=idempotent, **configs)
        self.metadata = FakeMetadata()
        self.client = FakeClient()
        self.txn_partitions = TxnPartitionMap(
            self.config["max_in_flight_requests_per_connection"]) if idempotent else None
        self.acc = k.RecordAccumulator(self.metadata, self.txn_partitions,
                                       **accumulator_settings(self.config))
        self.metadata.add_update_listener(self.acc.metadata_updated)
        self.size = k.record_size_upper_bound(None, b"v", None)
        self.sender = sender_for(self.config, self.client, self.metadata, self.acc,
                                 self.txn_partitions, None, sender_loop=k.SenderLoop)
        self.sender.produce_loop.net = FakeNet(self.client, self.clock)
        self.calls = []

    def send(self, n=1, partition=0):
        """n records appended now (on the fake clock: SendPath would read the real one)."""
        info = self.acc.topic_info("t")
        out = []
        for _ in range(n):
            f, _, new_batch, _ = self.acc.append(info.tps[partition], 0, None, b"v", None, -1,
                                                 self.size, 1000, self.clock.now)
            if new_batch:  # the compiled accumulator reads the real clock: use the fake one
                batch = info.deques[partition][-1]
                batch.created_ms = batch.last_attempt_ms = self.clock.now
                batch.created_frac_us = 0
            f.add_both(self.calls.append)
            out.append(f)
        return out

    def loop(self, advance=0):
        """One Sender loop `advance` ms later; returns its poll timeout."""
        self.clock.now += advance
        self.sender.run_once()
        return self.client.polls[-1]

    def start(self):
        """Get a producer id (idempotent rigs)."""
        if self.txn_partitions is not None:
            self.loop()
            self.client.answer_init_pid()


def test_poll_timeout_is_linger_left_then_delivery_deadline(k, monkeypatch):
    rig = Rig(k, monkeypatch, idempotent=False, acks=1, linger_ms=100,
              delivery_timeout_ms=60_000)
    assert rig.loop() > 0  # nothing queued: no busy loop
    rig.send(3)
    assert rig.loop() == 100  # linger left
    assert rig.loop(40) == 60
    assert rig.loop(60) == 0  # sent: loop again at once
    assert len(rig.client.requests) == 1
    timeout = rig.loop()
    assert 0 < timeout <= 60_000  # waiting for the answer, bounded by the next deadline
    assert rig.loop(10) > 0


class Counting:
    """The accumulator, counting the calls that scan every deque for expiry."""

    def __init__(self, acc):
        self._acc, self.scans = acc, 0

    def __getattr__(self, name):
        return getattr(self._acc, name)

    def expired_batches(self, now):
        self.scans += 1
        return self._acc.expired_batches(now)


def test_expiry_does_not_scan_the_queues_every_loop(k, monkeypatch):
    rig = Rig(k, monkeypatch, idempotent=False, acks=1)
    rig.sender.accumulator = counting = Counting(rig.acc)
    for i in range(200):
        rig.send(1, partition=i % 2)
        rig.loop(1)
        for req in rig.client.take():
            rig.client.answer(req, {})
    assert counting.scans <= 2  # the wheel says when a look is due (at most once a second)


def test_no_busy_loop_while_waiting(k, monkeypatch):
    rig = Rig(k, monkeypatch, max_in_flight_requests_per_connection=1)
    rig.start()
    rig.send(1)
    rig.loop()
    assert len(rig.client.requests) == 1
    rig.send(5)  # behind the unacknowledged batch: may not go yet
    for _ in range(5):
        assert rig.loop(1) > 0
    rig.client.ready_nodes.clear()  # not ready at all: the node's delay bounds the wait
    assert 0 < rig.loop(1) <= 50


def test_queued_batch_expires_without_a_leader(k, monkeypatch):
    rig = Rig(k, monkeypatch, idempotent=False, acks=1, delivery_timeout_ms=5000,
              request_timeout_ms=1000)
    rig.metadata.set_leader(-1)
    (f,) = rig.send(1)
    waits = [rig.loop()]
    while not f.is_done:
        waits.append(rig.loop(waits[-1]))
        assert len(waits) < 20
    assert all(w > 0 for w in waits[1:-1])
    assert rig.clock.now - T0 >= 5000
    assert isinstance(f.exception, errors.KafkaTimeoutError)
    assert rig.calls == [f.exception]
    assert rig.metadata.updates > 0  # unknown leader: metadata asked for


def test_batch_in_flight_expires_and_a_late_answer_is_ignored(k, monkeypatch):
    rig = Rig(k, monkeypatch, idempotent=False, acks=1, delivery_timeout_ms=3000,
              request_timeout_ms=3000)
    (f,) = rig.send(1)
    rig.loop()
    (req,) = rig.client.take()
    assert rig.loop(2999) > 0 and not f.is_done
    rig.loop(1)
    assert isinstance(f.exception, errors.KafkaTimeoutError)
    assert "in flight" in str(f.exception)
    rig.client.answer(req, {}, base_offset=7)  # the broker answers after all
    assert isinstance(f.exception, errors.KafkaTimeoutError)
    assert rig.calls == [f.exception]  # once


def test_retry_waits_backoff_and_keeps_its_sequence(k, monkeypatch):
    rig = Rig(k, monkeypatch, retry_backoff_ms=100)
    rig.start()
    (f,) = rig.send(1)
    rig.loop()
    (req,) = rig.client.take()
    first = req.batches()
    rig.client.answer(req, {0: errors.NotLeaderForPartitionError.errno})
    assert rig.metadata.updates == 1  # invalid metadata: refresh
    assert 0 < rig.loop(10) <= 90  # backing off
    assert not rig.client.requests
    rig.loop(90)
    (req,) = rig.client.take()
    assert req.batches() == first  # same producer id and sequence
    rig.client.answer(req, {}, base_offset=5)
    assert f.get(0).offset == 5 and rig.calls == [f.value]


def test_retries_exhausted(k, monkeypatch):
    rig = Rig(k, monkeypatch, idempotent=False, acks=1, retries=1, retry_backoff_ms=0)
    (f,) = rig.send(1)
    for _ in range(2):
        rig.loop(1)
        (req,) = rig.client.take()
        rig.client.answer(req, {0: errors.NotEnoughReplicasError.errno})
    assert isinstance(f.exception, errors.NotEnoughReplicasError) and len(rig.calls) == 1


def test_duplicate_sequence_is_success(k, monkeypatch):
    rig = Rig(k, monkeypatch)
    rig.start()
    (f,) = rig.send(1)
    rig.loop()
    (req,) = rig.client.take()
    rig.client.answer(req, {0: errors.DuplicateSequenceNumberError.errno})
    assert f.succeeded() and f.value.offset == -1


def _two_in_flight(rig):
    """First batch acknowledged (so up to 5 may fly), then two more batches in flight."""
    rig.start()
    rig.send(1)
    rig.loop()
    (req,) = rig.client.take()
    rig.client.answer(req, {})
    a = rig.send(2)
    rig.loop()
    b = rig.send(3)
    rig.loop()
    reqs = rig.client.take()
    assert [r.batches()[0][2] for r in reqs] == [1, 3]
    return a, b, reqs


def test_out_of_order_sequence_fails_the_first_batch_and_resets(k, monkeypatch):
    rig = Rig(k, monkeypatch, retry_backoff_ms=0)
    a, b, (req_a, req_b) = _two_in_flight(rig)
    oos = errors.OutOfOrderSequenceNumberError.errno
    rig.client.answer(req_a, {0: oos})
    assert all(isinstance(f.exception, errors.OutOfOrderSequenceNumberError) for f in a)
    assert rig.txn_partitions.reset_pending
    rig.client.answer(req_b, {0: oos})  # only out of turn: retried, not failed
    assert not any(f.is_done for f in b)
    rig.loop(1)  # the epoch goes up (KIP-360), sequences from 0: no InitProducerId
    assert not rig.client.take(init_producer_id.API_KEY)
    (req,) = rig.client.take()
    assert req.batches() == [(0, 1000, 0, 3)] and rig.txn_partitions.producer_epoch == 1
    rig.client.answer(req, {}, base_offset=9)
    assert [f.get(0).offset for f in b] == [9, 10, 11]
    assert len(rig.calls) == 6  # the first record, then a and b once each


def test_unknown_producer_id_retries_under_a_new_epoch(k, monkeypatch):
    rig = Rig(k, monkeypatch, retry_backoff_ms=0)
    a, b, (req_a, req_b) = _two_in_flight(rig)
    rig.client.answer(req_a, {0: errors.UnknownProducerIdError.errno})
    rig.client.answer(req_b, {0: errors.OutOfOrderSequenceNumberError.errno})
    assert not any(f.is_done for f in a + b)
    rig.loop(1)  # one batch in flight until the new epoch's first ack
    (req,) = rig.client.take()
    assert req.batches() == [(0, 1000, 0, 2)] and rig.txn_partitions.producer_epoch == 1
    rig.client.answer(req, {}, base_offset=20)
    rig.loop(1)
    (req,) = rig.client.take()
    assert req.batches() == [(0, 1000, 2, 3)]
    rig.client.answer(req, {}, base_offset=22)
    assert [f.get(0).offset for f in a + b] == [20, 21, 22, 23, 24]


def test_expired_retry_resets_the_producer_id(k, monkeypatch):
    rig = Rig(k, monkeypatch, delivery_timeout_ms=2000, request_timeout_ms=1000,
              retry_backoff_ms=0)
    rig.start()
    (f,) = rig.send(1)
    rig.loop()
    (req,) = rig.client.take()
    req.callback(Response(error=errors.RequestTimedOutError("timed out")))  # fate unknown
    rig.client.ready_nodes.clear()  # and the broker stays away
    waits = []
    while not f.is_done:
        waits.append(rig.loop(waits[-1] if waits else 1))
        assert len(waits) < 100
    assert isinstance(f.exception, errors.KafkaTimeoutError)
    assert rig.txn_partitions.resets == 1  # its sequence may or may not be in the log


@pytest.mark.parametrize("acks", [0, 1])
def test_each_future_completes_once_under_a_storm_of_answers(k, monkeypatch, acks):
    rig = Rig(k, monkeypatch, idempotent=False, acks=acks, retry_backoff_ms=0,
              batch_size=200)
    futures = rig.send(40, partition=0) + rig.send(40, partition=1)
    codes = [errors.NotLeaderForPartitionError.errno, errors.RequestTimedOutError.errno, 0]
    for i in range(200):
        rig.loop(1)
        for j, req in enumerate(rig.client.take()):
            if acks == 0:
                req.callback(Response(error=errors.KafkaConnectionError("x") if i % 3 else None))
            else:
                rig.client.answer(req, {p: codes[(i + j + p) % 3] for p in (0, 1)})
        if all(f.is_done for f in futures):
            break
    assert all(f.succeeded() for f in futures)
    assert len(rig.calls) == len(futures)


def test_out_of_order_behind_a_retried_batch_is_retried(k, monkeypatch):
    """A real broker refuses b (sequence 3) while a (sequence 1) waits for its retry: b is only
    out of turn, even though it is the only batch in flight by then."""
    rig = Rig(k, monkeypatch, retry_backoff_ms=100)
    a, b, (req_a, req_b) = _two_in_flight(rig)
    rig.client.answer(req_a, {0: errors.NotLeaderForPartitionError.errno})
    rig.client.answer(req_b, {0: errors.OutOfOrderSequenceNumberError.errno})
    assert not any(f.is_done for f in a + b) and not rig.txn_partitions.reset_pending
    rig.loop(100)
    rig.loop(0)
    reqs = rig.client.take()
    assert [r.batches() for r in reqs] == [[(0, 1000, 1, 2)], [(0, 1000, 3, 3)]]  # in order
    for req, offset in zip(reqs, (30, 32)):
        rig.client.answer(req, {}, base_offset=offset)
    assert [f.get(0).offset for f in a + b] == [30, 31, 32, 33, 34]


@pytest.mark.parametrize("linger_ms,spacing_ms", [(50, 2), (1, 1), (0, 0)])
def test_a_node_that_just_got_a_request_waits_for_full_batches(k, monkeypatch, linger_ms,
                                                               spacing_ms):
    """A node that got a ProduceRequest under min(2 ms, linger_ms) ago counts as busy, as with
    requests in flight: a full batch (at batch_size, not grown to batch_max_size) waits until
    that has passed (the poll's timeout says when); a record never waits past linger_ms."""
    rig = Rig(k, monkeypatch, idempotent=False, acks=1, linger_ms=linger_ms, batch_size=200,
              batch_max_size=1 << 20)
    rig.send(20)  # past batch_size: full
    assert rig.loop() == 0 and len(rig.client.requests) == 1
    for req in rig.client.take():
        rig.client.answer(req, {})
    rig.loop()
    rig.send(20)
    timeout = rig.loop()
    if spacing_ms:
        assert rig.client.requests == [] and timeout == pytest.approx(spacing_ms)
        assert rig.loop(spacing_ms - 1) == pytest.approx(1) and rig.client.requests == []
        rig.loop(1)
    assert len(rig.client.requests) == 1  # spaced by spacing_ms; at once without linger
    assert len(rig.calls) == 20  # the first request's records, answered
