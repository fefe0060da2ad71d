"""kafka-python's producer metrics (``KafkaProducer.metrics()``), from counters the C path keeps.

The counters: kcore's SenderLoop (per request, per response and per network poll: records,
bytes, compression, queue time, a tally per topic and per node; kcore/sender_loop.pxd), the
Sender's Counter (retried and failed records, in all and per topic), and gauges (the
BufferPool, the connections, the metadata). Nothing here runs per record.

Windows as kafka-python's Sensors keep them: ``metrics_num_samples`` samples of
``metrics_sample_window_ms`` each; a sample starts with the first value recorded after the
previous one is complete; a rate divides what the samples hold by their span, counted as at
least num_samples - 1 full windows. Here the Sender thread snapshots the counters every second,
in C (SenderLoop.samples: it runs no Python for this), and each read (``metrics()``, a metric's
``value()`` a second after the last read) records each snapshot's increase at the snapshot's
time, then the counters now: each value lands in the window it happened in, to a second.
``metric_reporters`` are made, told and closed as kafka-python's are: ``init([])``,
``metric_change(metric)`` for each metric as it appears (per-topic and per-node ones at the
first read after their first request), ``close()``.
"""
import collections
import logging
import threading
import time

from kcore import now_ms

log = logging.getLogger(__name__)

RATE, RATE_NS, AVG, MAX, GAUGE = "rate", "rate-ns", "avg", "max", "gauge"
SAMPLE_EVERY_MS = 1000  # the Sender thread's look at the counters (at most a window)
_NEVER = -(1 << 62)

# (name, kind, value counter, event counter, description); the counters are the keys of the
# scope's counts (_loop_counts, _topic_counts, NodeTally's fields). A MAX counter is the max
# since the last look (not a total); an event counter says when something was recorded.
PRODUCER = (
    ("batch-size-avg", AVG, "bytes", "batches", "Mean bytes per batch sent."),
    ("batch-size-max", MAX, "batch_max", "batches", "Largest batch sent, in bytes."),
    ("compression-rate-avg", AVG, "ratio", "batches",
     "Mean of each batch's sent size / uncompressed size."),
    ("record-queue-time-avg", AVG, "queue", "batches",
     "Mean ms a batch waited in the accumulator before its request."),
    ("record-queue-time-max", MAX, "queue_max", "batches",
     "Longest ms a batch waited in the accumulator before its request."),
    ("record-send-rate", RATE, "records", "produce_requests", "Records sent per second."),
    ("records-per-request-avg", AVG, "records", "produce_requests", "Mean records per request."),
    ("byte-rate", RATE, "bytes", "produce_requests", "Batch bytes sent per second."),
    ("record-retry-rate", RATE, "retries", "retries", "Records retried per second."),
    ("record-error-rate", RATE, "errors", "errors", "Records failed per second."),
    ("record-size-max", MAX, "rsize_max", "batches",
     "Largest mean record size (uncompressed bytes) of a batch."),
    ("record-size-avg", AVG, "rsize", "batches",
     "Mean over batches of their mean record size (uncompressed bytes)."),
    ("io-wait-ratio", RATE_NS, "poll_ns", "polls",
     "Fraction of time the I/O thread spent in its network poll (waiting, and its socket I/O)."),
    ("io-wait-time-ns-avg", AVG, "poll_ns", "polls", "Mean ns per network poll."),
    ("select-rate", RATE, "polls", "polls", "Network polls per second."),
)
TOPIC = (
    ("record-send-rate", RATE, "records", "batches", "Records sent per second."),
    ("byte-rate", RATE, "bytes", "batches", "Batch bytes sent per second."),
    ("compression-rate", AVG, "ratio", "batches",
     "Mean of each batch's sent size / uncompressed size."),
    ("record-retry-rate", RATE, "retries", "retries", "Records retried per second."),
    ("record-error-rate", RATE, "errors", "errors", "Records failed per second."),
)
# Produce requests and their responses (per node; summed into producer-metrics)
NODE = (
    ("outgoing-byte-rate", RATE, "request_bytes", "requests", "Request bytes per second."),
    ("request-rate", RATE, "requests", "requests", "Requests per second."),
    ("request-size-avg", AVG, "request_bytes", "requests", "Mean request size in bytes."),
    ("request-size-max", MAX, "request_max", "requests", "Largest request in bytes."),
    ("incoming-byte-rate", RATE, "response_bytes", "responses", "Response bytes per second."),
    ("response-rate", RATE, "responses", "responses", "Responses per second."),
    ("request-latency-avg", AVG, "latency_sum", "responses", "Mean request latency in ms."),
    ("request-latency-max", MAX, "latency_max", "responses", "Longest request latency in ms."),
    ("throttle-time-avg", AVG, "throttle_sum", "responses", "Mean broker throttle time in ms."),
    ("throttle-time-max", MAX, "throttle_max", "responses", "Longest broker throttle in ms."),
)
NODE_FIELDS = ("requests", "request_bytes", "request_max", "responses", "response_bytes",
                "latency_sum", "latency_max", "throttle_sum", "throttle_max")
_PRODUCER_GROUP = "producer-metrics"


class MetricName:
    """kafka-python's MetricName: equal (and hashed) by name, group and tags."""
    __slots__ = ("name", "group", "description", "_tags")

    def __init__(self, name, group, description=None, tags=None):
        self.name, self.group, self.description = name, group, description
        self._tags = dict(tags or {})

    @property
    def tags(self):
        return dict(self._tags)

    def _key(self):
        return self.group, self.name, frozenset(self._tags.items())

    def __eq__(self, other):
        return isinstance(other, MetricName) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "MetricName(name=%s, group=%s, description=%s, tags=%s)" % (
            self.name, self.group, self.description, self._tags)


class MetricConfig:
    """kafka-python's MetricConfig, as a reporter may read it."""
    __slots__ = ("samples", "time_window_ms", "tags", "event_window", "quota")

    def __init__(self, samples, time_window_ms, tags):
        self.samples, self.time_window_ms, self.tags = samples, time_window_ms, tags
        self.event_window, self.quota = float("inf"), None


class KafkaMetric:
    """kafka-python's KafkaMetric: ``metric_name``, ``config``, ``value(time_ms=None)`` (any
    thread: what the samples hold, counted at most a second ago, or the gauge now)."""
    __slots__ = ("metric_name", "config", "_measure", "_registry")

    def __init__(self, metric_name, config, measure, registry):
        self.metric_name, self.config = metric_name, config
        self._measure, self._registry = measure, registry

    def value(self, time_ms=None):
        now = now_ms() if time_ms is None else time_ms
        with self._registry._lock:
            self._registry.refresh(now)
            return self._measure(now)

    def __repr__(self):
        return "KafkaMetric(%r)" % (self.metric_name,)


class Window:
    """kafka-python's SampledStat of one kind (RATE, RATE_NS: the sum over the span; AVG: sum /
    events; MAX), over ``config.samples`` samples of ``config.time_window_ms``."""
    __slots__ = ("kind", "config", "starts", "values", "events", "current")

    def __init__(self, kind, config):
        self.kind, self.config = kind, config
        self.starts, self.values, self.events, self.current = [], [], [], 0

    def _initial(self):
        return float("-inf") if self.kind == MAX else 0.0

    def _new(self, i, now):
        """Sample i starts (again) at now."""
        if i == len(self.starts):
            self.starts.append(now)
            self.values.append(0.0)
            self.events.append(0)
        self.starts[i], self.values[i], self.events[i] = now, self._initial(), 0

    def record(self, value, events, now):
        if not self.starts:
            self._new(0, now)
        elif now - self.starts[self.current] >= self.config.time_window_ms:
            self.current = (self.current + 1) % self.config.samples
            self._new(self.current, now)
        i = self.current
        self.values[i] = max(self.values[i], value) if self.kind == MAX else self.values[i] + value
        self.events[i] += events

    def measure(self, now):
        cfg = self.config
        for i, start in enumerate(self.starts):  # samples too old to count start again
            if now - start >= cfg.samples * cfg.time_window_ms:
                self._new(i, now)
        if self.kind == MAX:
            return max(self.values, default=float("-inf"))
        if self.kind == AVG:
            events = sum(self.events)
            return sum(self.values) / events if events else 0.0
        if not self.starts:
            self._new(0, now)
        elapsed = now - min(self.starts)  # the span: at least samples - 1 full windows
        full = int(elapsed // cfg.time_window_ms)
        if full < cfg.samples - 1:
            elapsed += (cfg.samples - 1 - full) * cfg.time_window_ms
        if elapsed <= 0:
            return 0.0
        return sum(self.values) / (elapsed * 1e6 if self.kind == RATE_NS else elapsed / 1000.0)


class ProducerMetrics:
    """One producer's registry of metrics; ``metrics(raw)`` is KafkaProducer.metrics()."""

    @classmethod
    def for_producer(cls, producer):
        """The registry of a KafkaProducer (its config, Sender, pool, metadata, client), or
        None with metrics_enabled=False."""
        if not producer.config["metrics_enabled"]:
            return None
        return cls(producer.config, producer._sender, producer._accumulator.pool,
                   producer._metadata, producer._client)

    def __init__(self, config, sender, pool, metadata, client):
        self.config = MetricConfig(config["metrics_num_samples"],
                                   config["metrics_sample_window_ms"],
                                   {"client-id": config["client_id"]})
        self._every = int(min(SAMPLE_EVERY_MS, self.config.time_window_ms))
        # what metrics() and value() record under; a fork takes it first (producer.py)
        self.lock = self._lock = threading.RLock()
        self._metrics = {}  # MetricName -> KafkaMetric
        # scope (None, ("topic", t), ("node", n)) -> [(spec, Window, its last (value, events))]
        self._stats = {}
        self._closed = False
        self._sender, self._loop, self._pool = sender, sender.produce_loop, pool
        self._metadata, self._connections = metadata, client.network_poll.connections
        self._started = self._sampled = now_ms()  # _sampled: the last look at the counters
        loop = self._loop  # its snapshots, taken in C on the Sender thread (sender_loop.pxd)
        loop.samples = collections.deque(maxlen=int(
            self.config.samples * self.config.time_window_ms // self._every) + 2)
        loop.totals = sender.metrics
        loop.sample_every_ms = self._every
        loop.sample_due_ms = int(self._started) + self._every
        self._reporters = [reporter() for reporter in config["metric_reporters"]]
        for reporter in self._reporters:
            reporter.init([])
        self._add("count", "kafka-metrics-count", "Metrics registered.",
                  lambda now: len(self._metrics))
        self._add_scope(None)
        for name, description, gauge in self._gauges():
            self._add(name, _PRODUCER_GROUP, description, gauge)

    # -- the registry -----------------------------------------------------------------------
    def _add(self, name, group, description, measure):
        metric = KafkaMetric(MetricName(name, group, description, self.config.tags),
                             self.config, measure, self)
        self._metrics[metric.metric_name] = metric
        self._tell("metric_change", metric)

    def _tell(self, method, *args):
        if self._closed:
            return
        for reporter in self._reporters:
            try:
                getattr(reporter, method)(*args)
            except Exception:  # noqa: BLE001 - a reporter must not stop the I/O thread
                log.exception("Metric reporter %r failed in %s", reporter, method)

    def _add_scope(self, scope):
        if scope is None:
            group, specs = _PRODUCER_GROUP, PRODUCER + NODE
        elif scope[0] == "topic":
            group, specs = "producer-topic-metrics.%s" % scope[1], TOPIC
        else:
            group, specs = "producer-node-metrics.node-%s" % scope[1], NODE
        stats = self._stats[scope] = []
        for spec in specs:
            window = Window(spec[1], self.config)
            stats.append((spec, window, [0, 0]))  # and (value, events) last recorded
            self._add(spec[0], group, spec[4], window.measure)

    def _gauges(self):
        loop, counter, pool = self._loop, self._sender.metrics, self._pool
        return (
            ("buffer-available-bytes", "Buffer memory free, in bytes.",
             lambda now: pool.available_memory),
            ("buffer-total-bytes", "Buffer memory (buffer_memory), in bytes.",
             lambda now: pool.total_memory),
            ("waiting-threads", "Threads blocked in send() waiting for buffer memory.",
             lambda now: pool.waiters),
            ("requests-in-flight", "Requests awaiting a response.",
             lambda now: sum(len(c.in_flight) for c in list(self._connections.values()))),
            ("connection-count", "Broker connections open or opening.",
             lambda now: sum(c.sock is not None for c in list(self._connections.values()))),
            ("metadata-age", "Seconds since the last metadata update (or the start).",
             self._metadata_age),
            ("metadata-version", "Metadata updates so far (pyprod).",
             lambda now: self._metadata.version),
            ("record-send-total", "Records acknowledged (pyprod).",
             lambda now: loop.records_sent),
            ("record-retry-total", "Records retried.",
             lambda now: counter["record-retry-total"]),
            ("record-error-total", "Records failed.", lambda now: counter["record-error-total"]),
            ("batch-split-total", "Batches split after MESSAGE_TOO_LARGE.",
             lambda now: counter["batch-split-total"]),
            ("request-total", "Produce requests sent.", lambda now: loop.requests),
            ("batch-total", "Batches sent (resends included).", lambda now: loop.batches),
        )

    def _metadata_age(self, now):
        last = self._metadata._last_success_ms
        return (now - (last if last > _NEVER else self._started)) / 1000.0

    # -- sampling ---------------------------------------------------------------------------
    def refresh(self, now):
        """sample() if the last look is a second old or more."""
        if now - self._sampled >= self._every:
            self.sample(now)

    def sample(self, now):
        """Record the snapshots the Sender thread took since the last look, then the counters
        now. A full deque lost its oldest snapshots: its first one is only a starting point."""
        with self._lock:
            ring = self._loop.samples
            baseline = len(ring) == ring.maxlen
            while ring:
                self._record(ring.popleft(), baseline)
                baseline = False
            self._record(self._loop.snapshot(int(now)), False)
            self._sampled = now

    def _record(self, snapshot, baseline):
        """Each metric's increase since its last recording, recorded at the snapshot's time
        once its event counter moved (so a snapshot older than what was seen adds nothing)."""
        t, scopes = _scopes(snapshot)
        for scope, values in scopes.items():
            if scope not in self._stats:
                self._add_scope(scope)
            for (_, kind, value_key, event_key, _), window, last in self._stats[scope]:
                value, events = values[value_key], values[event_key]
                if events > last[1]:
                    if not baseline:
                        window.record(value if kind == MAX else max(value - last[0], 0),
                                      events - last[1], t)
                    last[:] = value, events

    # -- the API ----------------------------------------------------------------------------
    def metrics(self, raw=False):
        """kafka-python's: {group: {name: value}}, or raw: {MetricName: KafkaMetric}."""
        now = now_ms()
        self.sample(now)
        with self._lock:
            if raw:
                return dict(self._metrics)
            out = {}
            for name, metric in self._metrics.items():
                out.setdefault(name.group, {})[name.name] = metric.value(now)
            return out

    def close(self):
        """The producer closes: close the reporters (once). Values stay readable."""
        with self._lock:
            self._tell("close")
            self._closed = True


def _scopes(snapshot):
    """(time, {scope: its counters}) of a SenderLoop snapshot: producer-metrics (None; the
    nodes' counters summed, their maxima the largest), each topic and each node."""
    t, counts, topics, nodes, totals = snapshot
    totals = totals or {}
    producer = dict(counts, retries=totals.get("record-retry-total", 0),
                    errors=totals.get("record-error-total", 0), **dict.fromkeys(NODE_FIELDS, 0))
    scopes = {None: producer}
    for node, tally in nodes.items():
        scopes["node", node] = tally
        for f, v in tally.items():
            producer[f] = max(producer[f], v) if f.endswith("_max") else producer[f] + v
    for key in totals:  # a topic that only failed has its group too
        if isinstance(key, tuple):
            topics.setdefault(key[1], {"records": 0, "bytes": 0, "batches": 0, "ratio": 0.0})
    for topic, tally in topics.items():
        scopes["topic", topic] = dict(tally, retries=totals.get(("record-retry-total", topic), 0),
                                      errors=totals.get(("record-error-total", topic), 0))
    return t, scopes
