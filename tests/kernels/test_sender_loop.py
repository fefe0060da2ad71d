"""SenderLoop (the produce round trip) on both implementations, without a network: requests
framed from drained batches, the batches' delivery deadlines, and one response completing the
acknowledged batches itself while every other outcome goes back through the hooks."""
import pytest

from pyprod import config
from pyprod import errors
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.producer import accumulator_settings
from pyprod.protocol import produce

V = 9
NOW = 10 ** 12


class FakeMetadata:
    def __init__(self, partitions=3):
        self.version = 1
        parts = {i: PartitionInfo("t", i, 0, 0, [0], [0], []) for i in range(partitions)}
        self.cluster = Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, {"t": parts})


class Response:
    def __init__(self, body=None, error=None):
        self.body, self.error = body, error


class Rig:
    def __init__(self, k, acks=1, tm=None, delivery_timeout_ms=120_000):
        cfg = config.build(linger_ms=0, batch_size=1024)
        self.meta = FakeMetadata()
        self.acc = k.RecordAccumulator(self.meta, tm, seed=3, **accumulator_settings(cfg))
        self.decisions = []
        self.loop = k.SenderLoop(
            self.acc, tm, now=NOW, acks=acks, request_timeout_ms=30_000,
            delivery_timeout_ms=delivery_timeout_ms, guarantee_order=False,
            on_partition=lambda b, r: self.decisions.append(("partition", b, r)),
            on_error=lambda b, e: self.decisions.append(("error", b, e)))
        self.size = k.record_size_upper_bound(None, b"v", None)

    def batches(self, per_partition=2, partitions=(0, 1, 2)):
        info = self.acc.topic_info("t")
        futures = {}
        for p in partitions:
            futures[p] = [self.acc.append(info.tps[p], 0, None, b"v%d" % i, None, -1,
                                          self.size, 1000, NOW)[0]
                          for i in range(per_partition)]
        drained = self.acc.drain(self.meta.cluster, {0}, 1 << 20, NOW + 10 ** 6)[0]
        for batch in drained:  # the accumulators read the real clock
            batch.created_ms = NOW
        return drained, futures


def _response(parts, version=V):
    """parts: [(partition, error code, base offset)]."""
    return produce.API.encode_response(version, {"throttle_time_ms": 0, "responses": [
        {"name": "t", "partition_responses": [
            {"index": p, "error_code": code, "base_offset": offset, "log_append_time_ms": -1,
             "log_start_offset": 0, "record_errors": [], "error_message": None}
            for p, code, offset in parts]}]})


def _body_bytes(body):
    return b"".join(bytes(b) for b in body) if isinstance(body, list) else bytes(body)


def test_request_frames_the_batches_and_tracks_their_deadlines(k):
    rig = Rig(k)
    batches, _ = rig.batches()
    body, handler = rig.loop.request(V, batches, NOW)
    req = produce.API.decode_request(V, _body_bytes(body))
    parts = [(t.name, p.index, bytes(p.records)) for t in req.topic_data
             for p in t.partition_data]
    assert parts == [("t", b.topic_partition.partition, bytes(b.payload)) for b in batches]
    assert rig.loop.counters() == {"request-total": 1, "batch-total": 3, "record-send-total": 0}
    assert set(rig.loop.in_flight) == set(batches)
    assert rig.loop.next_deadline_delay(NOW) == 0  # the first look at the queues is due
    assert callable(handler)


def test_one_response_completes_the_acknowledged_batches(k):
    rig = Rig(k)
    batches, futures = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    handler(Response(_response([(0, 0, 100), (1, 6, 0), (2, 0, 200)])))
    assert [f.get(0).offset for f in futures[0]] == [100, 101]
    assert [f.get(0).offset for f in futures[2]] == [200, 201]
    assert not any(f.is_done for f in futures[1])
    ((what, batch, result),) = rig.decisions
    assert what == "partition" and batch.topic_partition.partition == 1 and result[2] == 6
    assert rig.loop.counters()["record-send-total"] == 4
    assert rig.loop.in_flight == {}


def test_a_partition_left_out_and_a_failed_request_go_to_on_error(k):
    rig = Rig(k)
    batches, _ = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    handler(Response(_response([(0, 0, 0), (2, 0, 0)])))
    ((what, batch, error),) = rig.decisions
    assert what == "error" and batch.topic_partition.partition == 1
    assert isinstance(error, errors.UnknownError)

    rig = Rig(k)
    batches, _ = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    handler(Response(error=errors.RequestTimedOutError("timed out")))
    assert [(w, b) for w, b, _ in rig.decisions] == [("error", b) for b in batches]


@pytest.mark.parametrize("body", [b"", b"\x00\x00\x00\x07garbage", b"\xff" * 40])
def test_a_response_that_does_not_decode_is_a_typed_error_for_every_batch(k, body):
    rig = Rig(k)
    batches, futures = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    handler(Response(body))
    assert len(rig.decisions) == 3
    assert all(w == "error" and isinstance(e, errors.KafkaError) for w, _, e in rig.decisions)
    assert not any(f.is_done for fs in futures.values() for f in fs)


def test_acks_0_completes_without_a_response(k):
    rig = Rig(k, acks=0)
    batches, futures = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    handler(Response(None))
    assert all(f.get(0).offset == -1 for fs in futures.values() for f in fs)
    assert rig.decisions == []


def test_a_batch_expired_in_flight_is_not_completed_by_its_late_response(k):
    rig = Rig(k, delivery_timeout_ms=1000)
    batches, futures = rig.batches()
    _, handler = rig.loop.request(V, batches, NOW)
    assert rig.loop.expire(NOW + 999) == ([], True)  # the first look at the queues only
    expired, scan = rig.loop.expire(NOW + 1000)
    assert set(expired) == set(batches) and not scan
    assert rig.loop.in_flight == {}
    handler(Response(_response([(0, 0, 0), (1, 0, 0), (2, 0, 0)])))
    assert rig.decisions == [] and not any(f.is_done for fs in futures.values() for f in fs)


def test_queue_scans_keep_the_earliest(k):
    rig = Rig(k)
    assert rig.loop.expire(NOW) == ([], True)  # the first look, due at once
    rig.loop.schedule_queue_scan(NOW, NOW + 500)
    rig.loop.schedule_queue_scan(NOW, NOW + 800)  # later than the one due: kept at 500
    assert 0 < rig.loop.next_deadline_delay(NOW) <= 500
    assert rig.loop.expire(NOW + 499) == ([], False)
    rig.loop.schedule_queue_scan(NOW + 499, NOW + 200)  # in the past: due now
    assert rig.loop.expire(NOW + 499) == ([], True)
    assert rig.loop.expire(NOW + 900) == ([], False)  # the one at 500 was replaced
    assert rig.loop.next_deadline_delay(NOW + 900) == 120_000  # nothing left: the timeout
