"""The kafka-python KafkaProducer contract: errors, flush, close, callbacks and pickle (fork:
test_fork_roundtrip.py)."""
import os
import pickle
import threading
import time

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_kafka_python


@pytest.fixture
def producer(kafka):
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5)
    yield p
    p.close(timeout=10)


@pytest.mark.skipif(not os.path.exists("/proc/self/timerslack_ns"), reason="Linux's timer slack")
def test_the_sender_thread_lingers_without_timer_slack(kafka, topic, producer):
    """linger_ms ends on time: the Sender's polls get no timer slack (Linux adds 50 us to each
    timed wait by default); the caller's thread keeps its own."""
    name = topic(1)
    producer.send(name, b"on time").get(30)
    with open("/proc/%d/timerslack_ns" % producer._sender.native_id) as f:
        assert int(f.read()) == 1
    with open("/proc/self/timerslack_ns") as f:
        assert int(f.read()) > 1
    assert [r.value for r in read_all_kafka_python(kafka.bootstrap_servers, name, 1)] == \
        [b"on time"]


def test_oversized_record_raises_and_others_still_go(kafka, topic, producer):
    name = topic(1)
    ok1 = producer.send(name, b"before")
    with pytest.raises(errors.MessageSizeTooLargeError):
        producer.send(name, b"x" * (producer.config["max_request_size"] + 1))
    ok2 = producer.send(name, b"after")
    assert ok1.get(30).offset + 1 == ok2.get(30).offset
    assert [r.value for r in read_all_kafka_python(kafka.bootstrap_servers, name, 2)] == \
        [b"before", b"after"]


def test_unknown_topic_without_auto_create_times_out(kafka):
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, allow_auto_create_topics=False,
                       max_block_ms=1500) as p:
        start = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError):
            p.send("no-such-topic-%d" % os.getpid(), b"v")
        assert time.monotonic() - start >= 1.4  # it waited max_block_ms, not less


def test_full_buffer_blocks_then_times_out(memory_blocked):
    with memory_blocked() as (p, name, _):
        for _ in range(1000):
            p.send(name, b"x" * 1000)


def test_flush_waits_for_everything(kafka, topic):
    name = topic(3)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=60_000) as p:
        futures = [p.send(name, b"%d" % i) for i in range(5000)]
        p.flush()
        assert all(f.is_done and f.succeeded() for f in futures)


def test_close_delivers_everything_and_then_refuses(kafka, topic):
    name = topic(3)
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=60_000)
    futures = [p.send(name, b"%d" % i) for i in range(3000)]
    p.close()
    p.close()  # idempotent
    assert all(f.succeeded() for f in futures)
    with pytest.raises(errors.IllegalStateError):
        p.send(name, b"late")
    assert len(read_all_kafka_python(kafka.bootstrap_servers, name, 3000)) == 3000


def test_callbacks_once_per_record_and_errbacks_on_failure(kafka, topic):
    name = topic(2)
    small = topic(1, configs={"max.message.bytes": "2000"})
    calls, errs = [], []
    lock = threading.Lock()

    def ok(md):
        with lock:
            calls.append((md.partition, md.offset))

    def bad(exc):
        with lock:
            errs.append(exc)

    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as p:
        for i in range(2000):
            p.send(name, b"%d" % i).add_callback(ok).add_errback(bad)
        f = p.send(small, b"y" * 5000).add_callback(ok).add_errback(bad)
        p.flush()
        with pytest.raises(errors.MessageSizeTooLargeError):
            f.get(10)
    assert len(calls) == len(set(calls)) == 2000
    assert len(errs) == 1 and isinstance(errs[0], errors.MessageSizeTooLargeError)


def test_partitions_for_metrics_and_bootstrap(kafka, topic, producer):
    name = topic(4)
    assert producer.partitions_for(name) == {0, 1, 2, 3}
    assert producer.bootstrap_connected()
    producer.send(name, b"v").get(30)
    assert producer.metrics()["producer-metrics"]["record-send-total"] >= 1


def test_pickling_is_refused_with_advice(producer):
    with pytest.raises(TypeError, match="inside the task"):
        pickle.dumps(producer)


def test_bad_input_gets_typed_errors(kafka, topic, producer):
    name = topic(1)
    with pytest.raises(ValueError):
        producer.send(name)
    with pytest.raises(TypeError):
        producer.send(name, "not bytes")
    with pytest.raises(TypeError):
        producer.send(name, b"v", headers=[("k", "str value")])
    with pytest.raises(TypeError):
        producer.send(None, b"v")
    with pytest.raises(errors.KafkaConfigurationError):
        KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, bogus_option=1)
