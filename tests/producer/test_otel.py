"""pyprod.otel on a real broker: the trace context of an active span reaches every record's
headers (read back by kafka-python), the PRODUCER span carries the messaging attributes, no
span means untouched records, and the producer's metrics come out through an OTel reader."""
import pytest

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pyprod import KafkaProducer
from pyprod.otel import instrument, uninstrument
from tests.harness.readback import read_all_kafka_python


@pytest.fixture
def otel():
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return tracer_provider, spans, MeterProvider(metric_readers=[reader]), reader


def _traceparent(headers):
    value = dict(headers).get("traceparent")
    return value and value.decode()


def test_trace_context_in_headers_and_metrics(kafka, topic, otel):
    tracer_provider, spans, meter_provider, reader = otel
    topic = topic(2)
    tracer = tracer_provider.get_tracer("test")
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, client_id="otel-test",
                       key_serializer=lambda k: k and k.encode()) as p:
        instrument(p, tracer_provider=tracer_provider, meter_provider=meter_provider)
        p.send(topic, b"untraced", headers=[("h", b"0")]).get(30)
        with tracer.start_as_current_span("request") as parent:
            p.send(topic, b"traced", key="k1", headers=[("h", b"1")], partition=0).get(30)
            p.send_batch(topic, [b"b1", b"b2"], headers=[None, [("h", b"2")]]).get(30)
        trace_id = format(parent.get_span_context().trace_id, "032x")
        uninstrument(p)
        with tracer.start_as_current_span("after"):
            p.send(topic, b"uninstrumented").get(30)
        p.flush()
        metrics = reader.get_metrics_data()
    records = {r.value: r for r in read_all_kafka_python(kafka.bootstrap_servers, topic, 5)}
    assert records[b"untraced"].headers == [("h", b"0")]
    assert records[b"uninstrumented"].headers == []
    for value in (b"traced", b"b1", b"b2"):
        tp = _traceparent(records[value].headers)
        assert tp and tp.split("-")[1] == trace_id, records[value].headers
    assert records[b"traced"].headers[0] == ("h", b"1")
    assert records[b"b2"].headers[0] == ("h", b"2")

    assert len(spans.get_finished_spans()) == 4  # request, its two sends, after
    send_spans = [s for s in spans.get_finished_spans() if s.name == f"send {topic}"]
    one, batch = sorted(send_spans, key=lambda s: "messaging.batch.message_count" in s.attributes)
    assert one.kind.name == "PRODUCER" and one.parent.span_id == parent.get_span_context().span_id
    assert one.attributes["messaging.system"] == "kafka"
    assert one.attributes["messaging.destination.name"] == topic
    assert one.attributes["messaging.destination.partition.id"] == "0"
    assert one.attributes["messaging.kafka.message.key"] == "k1"
    assert one.attributes["messaging.client.id"] == "otel-test"
    assert batch.attributes["messaging.batch.message_count"] == 2
    # the span's own context is what the record carries
    assert _traceparent(records[b"traced"].headers).split("-")[2] == \
        format(one.get_span_context().span_id, "016x")

    names = {m.name for rm in metrics.resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert "kafka.producer.buffer_available_bytes" in names, sorted(names)


def test_only_a_valid_span_is_traced_and_other_runtime_contexts(kafka, topic, otel,
                                                                 monkeypatch):
    """Baggage alone or an invalid span: records untouched, no span. With a runtime context
    other than OTel's ContextVar one, send() is wrapped in Python and traces the same."""
    from opentelemetry import baggage, context, trace

    import pyprod.otel

    tracer_provider, spans, _, _ = otel
    topic = topic(1)
    tracer = tracer_provider.get_tracer("test")
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as p:
        instrument(p, tracer_provider=tracer_provider, metrics=False)
        kcore_send = p.send
        token = context.attach(baggage.set_baggage("tenant", "a"))
        p.send(topic, b"baggage").get(30)
        context.detach(token)
        with trace.use_span(trace.INVALID_SPAN):
            p.send(topic, b"invalid").get(30)
        assert p.send == kcore_send  # instrument() left the bound kcore method in place
    assert spans.get_finished_spans() == ()
    monkeypatch.setattr(pyprod.otel, "_context_var", lambda: None)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as p:
        instrument(p, tracer_provider=tracer_provider, metrics=False)
        assert isinstance(p.send.__self__, pyprod.otel._Traced)
        with tracer.start_as_current_span("wrapped") as parent:
            p.send(topic, b"wrapped").get(30)
        uninstrument(p)
        p.send(topic, b"plain").get(30)
    records = {r.value: r for r in read_all_kafka_python(kafka.bootstrap_servers, topic, 4)}
    assert records[b"baggage"].headers == [] and records[b"invalid"].headers == []
    assert records[b"plain"].headers == []
    trace_id = format(parent.get_span_context().trace_id, "032x")
    assert _traceparent(records[b"wrapped"].headers).split("-")[1] == trace_id
