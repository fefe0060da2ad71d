"""metrics(): kafka-python's producer metric names, groups and windows (pyprod/producer_metrics.py)
from the counters kcore's SenderLoop keeps per request and response (both twins), the windows
checked against kafka-python's own Rate/Avg/Max, and a real producer's metrics and reporters."""
import collections
import random
import types

import pytest

from kcore.pure import sender_loop as pure
from kcore._sender_loop import _snapshot
from pyprod import KafkaProducer
from pyprod.producer_metrics import (AVG, MAX, RATE, MetricConfig, MetricName, ProducerMetrics,
                                     Window, now_ms)
from tests.kernels.test_sender_loop import NOW, V, Rig, _response


class Response:
    def __init__(self, body, latency_ms):
        self.body, self.error, self.latency_ms = body, None, latency_ms


def test_windows_measure_as_kafka_pythons_stats():
    from kafka.metrics import MetricConfig as TheirConfig
    from kafka.metrics.stats import Avg, Max, Rate

    rng = random.Random(7)
    for samples, window in ((2, 1000), (3, 250), (1, 500)):
        theirs_cfg, ours_cfg = TheirConfig(samples=samples, time_window_ms=window), \
            MetricConfig(samples, window, {})
        pairs = [(Rate(), Window(RATE, ours_cfg)), (Avg(), Window(AVG, ours_cfg)),
                 (Max(), Window(MAX, ours_cfg))]
        now = 10_000.0
        for _ in range(300):
            now += rng.choice((0, 1, 7, 40, 300, 900, 2500))
            if rng.random() < 0.7:
                value = rng.randrange(1000)
                for theirs, ours in pairs:
                    theirs.record(theirs_cfg, value, now)
                    ours.record(value, 1, now)
            for theirs, ours in pairs:
                try:
                    expected = theirs.measure(theirs_cfg, now)
                except ZeroDivisionError:  # kafka-python's Rate over an empty span: 0 here
                    expected = 0.0
                assert ours.measure(now) == pytest.approx(expected), (
                    type(theirs).__name__, samples, window)


def test_the_loop_counts_per_request_and_response(k):
    rig = Rig(k)
    batches, _ = rig.batches()
    sizes = [len(b.payload) for b in batches]
    body, handler = rig.loop.request(V, batches, NOW, 0)
    loop = rig.loop
    assert (loop.records_out, loop.bytes_out, loop.batch_max) == (6, sum(sizes), max(sizes))
    assert loop.ratio_sum == 3.0 and not loop.compressed  # uncompressed: exact sizes
    assert loop.record_size_sum == pytest.approx(sum((s - 61) / 2 for s in sizes))
    assert set(loop.topic_tallies) == {"t"} and loop.topic_tallies["t"].batches == 3
    node = loop.node_tallies[0]
    assert (node.requests, node.request_bytes) == (1, sum(len(piece) for piece in body))
    reply = _response([(0, 0, 0), (1, 0, 0), (2, 0, 0)])
    handler(Response(reply, 12))
    assert (node.responses, node.response_bytes, node.latency_sum, node.latency_max) == (
        1, len(reply), 12, 12)
    before = loop.records_out
    loop.request(V, rig.batches()[0], NOW)  # no node (a kernel test): no node tally
    assert loop.records_out == before + 6 and node.requests == 1


def _fake_producer(reporters=(), **config):
    loop = pure.SenderLoop(None, None, now=0, acks=1, request_timeout_ms=1, delivery_timeout_ms=1,
                           guarantee_order=False, on_partition=None, on_error=None)
    sender = types.SimpleNamespace(produce_loop=loop, metrics=collections.Counter())
    pool = types.SimpleNamespace(available_memory=100, total_memory=200, waiters=0)
    metadata = types.SimpleNamespace(_last_success_ms=-(1 << 62), version=3)
    client = types.SimpleNamespace(network_poll=types.SimpleNamespace(connections={}))
    cfg = dict(metrics_enabled=True, metrics_num_samples=2, metrics_sample_window_ms=1000,
               client_id="c1", metric_reporters=list(reporters), **config)
    return ProducerMetrics(cfg, sender, pool, metadata, client), loop, sender


class Recorder:
    calls = []

    def init(self, metrics):
        self.calls.append(("init", len(metrics)))

    def metric_change(self, metric):
        self.calls.append(("change", metric.metric_name.group, metric.metric_name.name))

    def close(self):
        self.calls.append(("close",))


def test_rates_and_averages_from_the_counters():
    Recorder.calls = []
    pm, loop, sender = _fake_producer([Recorder])
    assert loop.totals is sender.metrics and loop.samples.maxlen == 4  # 2 windows of 1 s, + 2
    assert Recorder.calls[0] == ("init", 0)
    t = now_ms()
    loop.requests, loop.records_out, loop.bytes_out, loop.batches = 2, 100, 5000, 4
    loop.batch_max, loop.ratio_sum = 2000, 2.0
    loop.topic_tallies["a"] = tally = pure.TopicTally()
    tally.records, tally.bytes, tally.batches, tally.ratio_sum = 100, 5000, 4, 2.0
    sender.metrics.update({"record-error-total": 3, ("record-error-total", "a"): 3})
    loop.samples.append(_snapshot(loop, int(t), True))  # what the Sender thread does each second
    assert loop.batch_max == 0  # started again
    m = pm.metrics()  # (now is later than t: rates measured over their span)
    p = m["producer-metrics"]
    assert p["records-per-request-avg"] == 50 and p["batch-size-avg"] == 1250
    assert p["batch-size-max"] == 2000 and p["compression-rate-avg"] == 0.5
    assert p["record-error-total"] == 3 and p["buffer-available-bytes"] == 100
    assert m["producer-topic-metrics.a"]["compression-rate"] == 0.5
    assert m["kafka-metrics-count"]["count"] == sum(len(g) for g in m.values())
    window = pm.config.time_window_ms / 1000.0  # one sample: the span is one window at least
    assert window <= 100 / p["record-send-rate"] < window + 5
    assert ("change", "producer-topic-metrics.a", "record-error-rate") in Recorder.calls
    raw = pm.metrics(raw=True)
    name = MetricName("record-send-rate", "producer-metrics", tags={"client-id": "c1"})
    assert raw[name].value() == pytest.approx(p["record-send-rate"], rel=0.01)
    pm.close()
    pm.close()
    assert Recorder.calls.count(("close",)) == 1


def test_a_full_ring_starts_from_its_oldest_snapshot():
    """Snapshots older than the windows were dropped: the oldest one left is a baseline."""
    pm, loop, _ = _fake_producer()
    t = now_ms()
    for i in range(1, 6):  # the deque keeps 4
        loop.requests, loop.records_out = i, 1000 * i
        loop.samples.append(_snapshot(loop, int(t - 50 + 10 * i), True))
    pm.sample(t)
    window = next(w for spec, w, _ in pm._stats[None] if spec[0] == "record-send-rate")
    assert sum(window.values) == 3000  # not 5000: the first 2000 were before the baseline


def test_nothing_is_recorded_without_events():
    pm, loop, _ = _fake_producer()
    pm.sample(1000.0)
    assert all(not w.starts for stats in pm._stats.values() for _, w, _ in stats)
    assert pm.metrics()["producer-metrics"]["batch-size-max"] == float("-inf")  # kafka-python's


def _metrics_of(kafka, name, **configs):
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5, **configs) as p:
        for i in range(300):
            p.send(name, value=b"x" * 100, key=b"%d" % (i % 5))
        p.flush()
        return p.metrics(), p.metrics(raw=True), p


def test_a_producers_metrics(kafka, topic):
    from kafka.metrics import DictReporter

    name = topic(2)
    metrics, raw, producer = _metrics_of(kafka, name, metric_reporters=[DictReporter],
                                         compression_type="gzip")
    p = metrics["producer-metrics"]
    assert p["record-send-rate"] > 0 and p["byte-rate"] > 0 and p["request-rate"] > 0
    # gzip: the uncompressed size is pyprod's upper bound (docs/configuration.md#metrics)
    assert 100 <= p["record-size-avg"] < 150 and p["batch-size-avg"] > 0
    assert 0 < p["compression-rate-avg"] < 0.5  # gzip of repeated bytes
    assert p["request-latency-avg"] >= 0 and p["request-latency-max"] >= p["request-latency-avg"]
    # no record failed; a retry may (a new topic's leader moving, on a loaded machine: CI once saw 10/s)
    assert p["record-error-rate"] == 0 and p["record-retry-rate"] >= 0
    assert p["buffer-total-bytes"] == 32 * 1024 * 1024 and p["buffer-available-bytes"] > 0
    assert p["waiting-threads"] == 0 and p["requests-in-flight"] >= 0
    assert 0 <= p["io-wait-ratio"] <= 1.5 and p["record-send-total"] == 300
    assert metrics["producer-topic-metrics.%s" % name]["record-send-rate"] > 0
    nodes = [g for g in metrics if g.startswith("producer-node-metrics.node-")]
    assert nodes and all(metrics[g]["response-rate"] > 0 for g in nodes)
    assert all(isinstance(k, MetricName) and k.tags == {"client-id": producer.config[
        "client_id"]} for k in raw)
    reporter = producer._producer_metrics._reporters[0]
    snapshot = reporter.snapshot()
    category = "producer-topic-metrics.%s.client-id=%s" % (name, producer.config["client_id"])
    assert set(snapshot[category]) == set(metrics["producer-topic-metrics.%s" % name])


def test_uncompressed_sizes_are_exact_and_metrics_can_be_off(kafka, topic):
    p = _metrics_of(kafka, topic(1))[0]["producer-metrics"]
    assert p["compression-rate-avg"] == 1.0 and 100 < p["record-size-avg"] < 115
    metrics, raw, _ = _metrics_of(kafka, topic(1), metrics_enabled=False)
    assert metrics is None and raw is None
