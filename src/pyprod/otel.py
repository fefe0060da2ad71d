"""OpenTelemetry for a producer (the `otel` extra): trace context in record headers and the
producer's metrics through the OTel metrics API. Nothing here runs unless you call it:

    from pyprod.otel import instrument
    instrument(producer)                      # the global tracer and meter providers
    instrument(producer, tracer_provider=tp, meter_provider=mp, metrics=False)

Tracing (OTel messaging semantic conventions): while a span is active, send() and send_batch()
start a PRODUCER span "send <topic>" (messaging.system "kafka", messaging.operation.name and
.type "send", messaging.destination.name, messaging.destination.partition.id when given,
messaging.kafka.message.key for str keys, messaging.batch.message_count for send_batch,
messaging.client.id) and inject its context into every record's headers with the configured
propagator (W3C `traceparent` by default). The span covers the append, not the broker's answer:
an error raised by send() is recorded on it. With no active span the records go out untouched:
send() stays kcore's, which looks the span up in OTel's context variable (SendPath.divert) and
calls this module only while one is set.

Metrics: one observable gauge per metric of ``producer.metrics()``, named
``kafka.producer.<name with _ for ->`` (as the Java instrumentation names kafka-clients'),
attributes client.id, and topic / node.id for the per-topic and per-node groups; read once per
collection. Metric names that appear only after instrument() (a topic's first record) are
observed if the name was known then (kafka-python's per-topic names always are).
"""
from __future__ import annotations

import contextvars
import threading
import time
import weakref

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import propagate, trace
    from opentelemetry.trace.propagation import _SPAN_KEY
    from opentelemetry.metrics import Observation
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("pyprod.otel needs OpenTelemetry: pip install 'pyprod[otel]'") from e

from pyprod.version import __version__

__all__ = ["instrument", "uninstrument"]

SCOPE = "pyprod"
# kafka-python's per-topic producer metrics: instruments exist for them before any topic does
TOPIC_METRICS = ("record-send-rate", "record-send-total", "byte-rate", "byte-total",
                 "compression-rate", "record-retry-rate", "record-retry-total",
                 "record-error-rate", "record-error-total")
_TOPIC_GROUP, _NODE_GROUP = "producer-topic-metrics.", "producer-node-metrics.node-"
_instrumented = weakref.WeakKeyDictionary()  # producer -> what instrument() did to it
_current_span, _NO_SPAN = trace.get_current_span, trace.INVALID_SPAN


def _context_var():
    """The ContextVar that OTel's runtime context keeps the current Context (a dict) in, or
    None (another runtime context, chosen with OTEL_PYTHON_CONTEXT)."""
    var = getattr(getattr(otel_context, "_RUNTIME_CONTEXT", None), "_current_context", None)
    return var if isinstance(var, contextvars.ContextVar) else None


def _in_span() -> bool:
    span = _current_span()
    return span is not _NO_SPAN and span.get_span_context().is_valid


class _HeaderSetter:
    """OTel's Setter over a list of (str, bytes) record headers."""

    @staticmethod
    def set(carrier, key, value):
        carrier.append((key, value.encode()))


class _Traced:
    """send()/send_batch() of one producer, with a PRODUCER span and injected headers while a
    span is active."""

    def __init__(self, producer, tracer):
        self.producer, self.tracer = producer, tracer
        self.raw_send, self.raw_send_batch = producer.send, producer.send_batch
        self.client_id = producer.config.get("client_id")

    def _start(self, topic, attrs):
        attrs.update({"messaging.system": "kafka", "messaging.operation.name": "send",
                      "messaging.operation.type": "send",
                      "messaging.destination.name": topic})
        if self.client_id:
            attrs["messaging.client.id"] = self.client_id
        return self.tracer.start_as_current_span(f"send {topic}", kind=trace.SpanKind.PRODUCER,
                                                 attributes=attrs)

    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None):
        if _current_span() is _NO_SPAN or not _in_span():  # the first test: no span at all
            return self.raw_send(topic, value, key, headers, partition, timestamp_ms)
        attrs = {}
        if partition is not None:
            attrs["messaging.destination.partition.id"] = str(partition)
        if isinstance(key, str):
            attrs["messaging.kafka.message.key"] = key
        with self._start(topic, attrs):
            carrier = list(headers or ())
            propagate.inject(carrier, setter=_HeaderSetter)
            return self.raw_send(topic, value, key, carrier, partition, timestamp_ms)

    def send_batch(self, topic, values, keys=None, headers=None, partitions=None,
                   timestamps=None):
        if not _in_span():
            return self.raw_send_batch(topic, values, keys, headers, partitions, timestamps)
        with self._start(topic, {"messaging.batch.message_count": len(values)}):
            injected = []
            propagate.inject(injected, setter=_HeaderSetter)
            headers = _with_headers(headers, injected, len(values))
            return self.raw_send_batch(topic, values, keys, headers, partitions, timestamps)


def _with_headers(headers, injected, count):
    """send_batch's headers with ``injected`` added to every record's."""
    if headers is None:
        return [injected] * count
    if hasattr(headers, "to_pylist"):  # a pyarrow list<struct<key, value>> array
        headers = [[(h["key"], h["value"]) for h in hs or ()] for hs in headers.to_pylist()]
    return [list(hs or ()) + injected for hs in headers]


class _Metrics:
    """The producer's metrics() as observable gauges, read once per collection."""

    def __init__(self, producer, meter):
        self.producer, self._lock = producer, threading.Lock()
        self._read_at, self._values = 0.0, {}
        client = {"client.id": producer.config.get("client_id") or ""}
        self.client = client
        names = set(TOPIC_METRICS)
        for group in producer.metrics().values():
            names.update(group)
        self.instruments = [meter.create_observable_gauge(
            "kafka.producer." + name.replace("-", "_"), callbacks=[self._callback(name)],
            description=f"kafka-python's producer metric {name}") for name in sorted(names)]

    def _snapshot(self):
        with self._lock:  # every gauge of one collection reads one metrics() call
            now = time.monotonic()
            if now - self._read_at > 0.5:
                try:
                    self._values = self.producer.metrics()
                except Exception:  # noqa: BLE001 - a closed producer reports nothing
                    self._values = {}
                self._read_at = now
            return self._values

    def _callback(self, name):
        def observe(options):
            out = []
            for group, values in self._snapshot().items():
                value = values.get(name)
                if not isinstance(value, (int, float)) or value != value:  # None, NaN
                    continue
                attrs = dict(self.client)
                if group.startswith(_TOPIC_GROUP):
                    attrs["topic"] = group[len(_TOPIC_GROUP):]
                elif group.startswith(_NODE_GROUP):
                    attrs["node.id"] = group[len(_NODE_GROUP):]
                out.append(Observation(value, attrs))
            return out
        return observe


def instrument(producer, tracer_provider=None, meter_provider=None, tracing=True,
               metrics=True):
    """Instrument one producer (see the module doc); returns it. Idempotent."""
    if producer in _instrumented:
        return producer
    state = {}
    if tracing:
        tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        traced = _Traced(producer, tracer)
        var = _context_var()
        if var is not None:  # send() stays kcore's: it calls traced.send while a span is set
            traced.raw_send = producer._send_direct
            producer._divert_send(var, _SPAN_KEY, traced.send)
        else:
            producer.send = traced.send
        producer.send_batch = traced.send_batch
        state["traced"], state["diverted"] = traced, var is not None
    if metrics:
        meter = otel_metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        state["metrics"] = _Metrics(producer, meter)
    _instrumented[producer] = state
    return producer


def uninstrument(producer):
    """Undo instrument()'s tracing (gauges stay registered with their meter provider, and
    read nothing once the producer is closed)."""
    state = _instrumented.pop(producer, {})
    traced = state.get("traced")
    if traced is not None:
        if state["diverted"]:
            producer._divert_send()
        else:
            producer.send = traced.raw_send
        del producer.send_batch  # the class's method again
    return producer
