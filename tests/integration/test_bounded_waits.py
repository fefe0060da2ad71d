"""The settings bound every wait: the constructor's bootstrap (kafka-python 2.x's
api_version_auto_timeout_ms or 3.x's bootstrap_timeout_ms), send() (max_block_ms, also with the
buffer full and the I/O thread stuck in a user callback) and close(timeout). The bounds below
are the settings plus a generous allowance for a loaded machine; nothing here times speed."""
import socket
import threading
import time

import pytest

from pyprod import KafkaProducer, errors

SLACK = 5.0  # seconds of allowance on a busy 2-core machine


@pytest.fixture
def silent_server():
    """Accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield "127.0.0.1:%d" % sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("key", ["api_version_auto_timeout_ms", "bootstrap_timeout_ms"])
def test_bootstrap_wait_is_bounded(silent_server, key):
    start = time.monotonic()
    with pytest.raises(errors.NoBrokersAvailable) as info:
        KafkaProducer(bootstrap_servers=silent_server, **{key: 1000})
    assert time.monotonic() - start < 1.0 + SLACK
    assert isinstance(info.value, errors.KafkaTimeoutError)  # kafka-python 3.x's class
    assert "1.0 s" in str(info.value)


def test_send_and_close_are_bounded_while_a_callback_blocks(kafka, topic):
    name = topic(1)
    release = threading.Event()
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, buffer_memory=64 * 1024,
                      batch_size=16 * 1024, max_block_ms=1000, linger_ms=0)
    try:
        p.send(name, b"first").add_callback(lambda _md: release.wait(60))
        time.sleep(0.5)  # the I/O thread is in the callback now: nothing drains
        start = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError):
            for _ in range(1000):
                p.send(name, b"x" * 1000)
        assert time.monotonic() - start < 1.0 + SLACK
        start = time.monotonic()
        p.close(timeout=1)
        assert time.monotonic() - start < 1.0 + SLACK
    finally:
        release.set()
        p.close()
