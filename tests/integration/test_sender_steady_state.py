"""The Sender's loop is kcore's (SenderLoop.run over kcore.network_poll): once a producer has its
producer id and its connection, a produce stream runs no Python bytecode in the Sender thread,
but the completion step's: the user's callbacks, and the threading.Event that wakes a thread
waiting on a future (flush(), get()). A profile hook on the Sender thread records every Python
function it enters (compiled code enters none), on a real broker, plaintext and TLS; what was
produced is read back."""
import collections
import contextlib
import gc
import threading

import pytest

import kcore
from pyprod import KafkaProducer
from tests.harness.readback import read_all, read_all_kafka_python

pytestmark = pytest.mark.skipif(not kcore.EXTENSIONS, reason="the compiled loop (kcore)")
# threading: an Event.set() waking a thread that waits on a future; _weakrefset: weakref
# callbacks, which run in whichever thread drops the last reference
_NOT_THE_SENDERS = ("/threading.py", "/_weakrefset.py")


@contextlib.contextmanager
def _no_cyclic_gc():
    """A collection runs gc.callbacks and finalizers of any test's garbage in whichever thread
    allocates when it is due: none while measuring."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _profiled_producer(**settings):
    """(producer, entered): entered counts the Python functions the Sender thread enters while
    entered['on'] is set."""
    entered = collections.Counter()
    state = {"on": False}

    def hook(frame, event, arg):
        if event == "call" and state["on"] and not frame.f_code.co_filename.endswith(
                _NOT_THE_SENDERS):
            entered[frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name] += 1

    threading.setprofile(hook)  # threads started from now on: the producer's Sender
    try:
        producer = KafkaProducer(**settings)
    finally:
        threading.setprofile(None)
    return producer, entered, state


def _warm(producer, name, partitions=3):
    """The producer id, the connection and metadata naming every leader, before measuring."""
    for partition in range(partitions):
        producer.send(name, b"warm", partition=partition).get(timeout=30)
    producer.flush()


def _stream(n, **settings):
    """n 100-byte records through a warmed, profiled producer into a fresh 3-partition topic
    of settings' broker; asserts the Sender thread entered no Python function meanwhile.
    Returns the topic."""
    name = settings.pop("topic")
    producer, entered, state = _profiled_producer(**settings)
    with producer:
        _warm(producer, name)
        with _no_cyclic_gc():
            state["on"] = True
            futures = [producer.send(name, b"v%d" % i + b"x" * 100) for i in range(n)]
            producer.flush()
            state["on"] = False
        assert all(f.succeeded() for f in futures)
    assert not entered, "the Sender thread ran Python: %s" % (entered.most_common(10),)
    return name


@pytest.mark.parametrize("settings", [
    {},                                                   # idempotent, acks=all (defaults)
    {"acks": 1, "linger_ms": 5, "compression_type": "lz4"},
    {"acks": 0, "enable_idempotence": False},
], ids=["defaults", "acks1-lz4", "acks0"])
def test_a_steady_stream_runs_no_python_in_the_sender(kafka, topic, settings):
    name = _stream(30_000, topic=topic(partitions=3), bootstrap_servers=kafka.bootstrap_servers,
                   **settings)
    if settings.get("acks") != 0:
        assert len(read_all_kafka_python(kafka.bootstrap_servers, name)) == 30_003


def test_user_callbacks_are_all_it_runs(kafka, topic):
    name = topic(partitions=3)
    producer, entered, state = _profiled_producer(bootstrap_servers=kafka.bootstrap_servers,
                                                  acks=1)
    acked = []

    def on_ack(metadata):
        acked.append(metadata.offset)

    with producer:
        _warm(producer, name)
        with _no_cyclic_gc():
            state["on"] = True
            for i in range(5_000):
                producer.send(name, b"v%d" % i).add_callback(on_ack)
            producer.flush()
            state["on"] = False
    assert len(acked) == 5_000
    assert set(entered) == {("test_sender_steady_state.py", "on_ack")}, entered


def test_over_tls_too(kafka_secure, topic):
    """TLS: the ssl object's reads and writes are kcore.network_poll's too."""
    config = kafka_secure.client_config("SSL")
    name = _stream(20_000, topic=topic(3, cluster=kafka_secure), linger_ms=5, **config)
    assert len(read_all(config["bootstrap_servers"], name, expected_count=20_003,
                        security=config)) == 20_003
