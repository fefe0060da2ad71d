"""Shared setup of the integration tests."""
import contextlib
import time

import pytest

from pyprod import KafkaProducer, errors


@pytest.fixture
def memory_blocked(kafka, topic):
    """A producer whose 64 KiB buffer the test fills while the broker is paused.

    ``with memory_blocked() as (producer, name, info):`` the body must end in a
    KafkaTimeoutError (``info`` is its pytest.ExceptionInfo); it is checked to come after
    max_block_ms (800 ms), and the broker answers again afterwards."""
    @contextlib.contextmanager
    def blocked():
        name = topic(1)
        with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, buffer_memory=64 * 1024,
                           batch_size=16 * 1024, max_block_ms=800, linger_ms=5) as p:
            p.send(name, b"warm").get(30)
            kafka.pause_node(0)  # the broker stops answering: batches hold their memory
            try:
                start = time.monotonic()
                with pytest.raises(errors.KafkaTimeoutError) as info:
                    yield p, name, info
                assert time.monotonic() - start >= 0.7
            finally:
                kafka.resume_node(0)
            p.flush(timeout=60)
    return blocked
