"""Fixtures of the fault tests: hostile brokers, producers closed after the test, and a watch
on the I/O thread (no ERROR log from pyprod, no uncaught exception in any thread)."""
import logging
import threading

import pytest

from pyprod import KafkaProducer
from pyprod.connection import BrokerConnection
from tests.harness.hostile_broker import HostileBroker

CLOSE_TIMEOUT = 5  # seconds: close() of a producer left over by a test


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def io_thread_errors():
    """What the test leaves logged at ERROR by pyprod or raised uncaught in any thread. After
    the test, no ERROR record may carry an exception (log.exception: an uncaught one) and no
    thread may have raised (a test that expects some clears the lists itself). Not autouse: a
    module opts in with pytestmark = pytest.mark.usefixtures("io_thread_errors")."""
    handler = _Collect()
    logger = logging.getLogger("pyprod")
    logger.addHandler(handler)
    uncaught = []
    previous = threading.excepthook

    def hook(args):
        uncaught.append("%s in thread %s: %s" % (args.exc_type.__name__,
                                                  getattr(args.thread, "name", "?"),
                                                  args.exc_value))
        previous(args)

    threading.excepthook = hook
    found = {"logged": handler.records, "uncaught": uncaught}
    try:
        yield found
    finally:
        threading.excepthook = previous
        logger.removeHandler(handler)
    logged = ["%s: %s (%s: %s)" % (r.name, r.getMessage(), r.exc_info[0].__name__,
                                    r.exc_info[1]) for r in handler.records if r.exc_info]
    assert not logged, "pyprod logged uncaught exceptions: %s" % logged
    assert not uncaught, "uncaught exceptions: %s" % uncaught


@pytest.fixture
def closes(monkeypatch):
    """Every (node id, error) a broker connection was closed with, in order."""
    seen = []
    close = BrokerConnection.close

    def recording(conn, error, now):
        if error is not None:
            seen.append((conn.node_id, error))
        return close(conn, error, now)

    monkeypatch.setattr(BrokerConnection, "close", recording)
    return seen


@pytest.fixture
def hostile_broker():
    """Factory: hostile_broker(**HostileBroker kwargs) -> a started HostileBroker, closed after
    the test (after the producers made with `producer`); its serving threads must not fail."""
    made = []

    def make(**kwargs):
        broker = HostileBroker(**kwargs)
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.close()
    for broker in made:
        assert not broker.errors, "hostile broker failed: %r" % broker.errors


@pytest.fixture
def producer(hostile_broker):
    """Factory: producer(bootstrap_servers, **config) -> KafkaProducer with small timeouts,
    closed after the test (before the brokers)."""
    made = []

    def make(bootstrap_servers, **config):
        config.setdefault("linger_ms", 5)
        config.setdefault("delivery_timeout_ms", 2500)
        config.setdefault("request_timeout_ms", 1000)
        config.setdefault("retry_backoff_ms", 50)
        config.setdefault("reconnect_backoff_ms", 20)
        config.setdefault("reconnect_backoff_max_ms", 200)
        config.setdefault("max_block_ms", 3000)
        config.setdefault("bootstrap_timeout_ms", 3000)
        config.setdefault("api_version_auto_timeout_ms", 3000)
        p = KafkaProducer(bootstrap_servers=bootstrap_servers, **config)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(timeout=CLOSE_TIMEOUT)
