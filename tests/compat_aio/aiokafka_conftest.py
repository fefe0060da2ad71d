"""Fixtures and hooks for running aiokafka's own producer tests against pyprod.aio.

``scripts/aiokafka_tests.py`` copies aiokafka's test files into a work directory (its ``tests``
package renamed ``aiokafka_tests``, so that it does not shadow ours) with ``AIOKafkaProducer``
swapped for ``pyprod.aio.AIOKafkaProducer`` in the test modules (not in ``_testutil.py``, whose
``send_messages`` fills input topics with aiokafka's own producer and reads its internals), and
writes a ``conftest.py`` there that star-imports this module. aiokafka's conftest starts its
broker in Docker; this replaces what its producer tests use:

kafka_server        one-node Apache Kafka (tests.harness.kafka_cluster.KafkaCluster), session-scoped, with
                    num.partitions=2 as aiokafka's Docker image has
loop                a class-scoped event loop, as aiokafka's
setup_test_class    what KafkaIntegrationTestCase reads: loop, hosts, kafka_host, kafka_port,
                    kafka_version (the SSL, SASL, ACL and Kerberos parts are None: the tests
                    that need them are excluded)

The aiokafka exceptions the tests catch stay aiokafka's: pyprod.aio raises subclasses of both
(pyprod.aio.errors). Collection keeps every test but those listed in aiokafka_excluded.txt
(they read or mock aiokafka internals); results go to PYPROD_KP_RESULTS as JSON with
tests/compat/kafka_python_conftest.py's hooks.
"""
from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

import pyprod.aio
from tests.harness.kafka_cluster import KafkaCluster
from tests.compat.kafka_python_conftest import (  # noqa: F401 (pytest hooks)
    BROKER_VERSION, _deselected, _unused_exclusions, exclusion_for, load_exclusions,
    pytest_collectreport, pytest_runtest_logreport, pytest_sessionfinish)

EXCLUDED_FILE = Path(__file__).with_name("aiokafka_excluded.txt")


def pytest_configure(config):
    config.addinivalue_line("markers", "ssl: aiokafka's mark of its SSL tests")


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        theirs = getattr(getattr(item, "module", None), "AIOKafkaProducer", None)
        if theirs is not pyprod.aio.AIOKafkaProducer:
            raise pytest.UsageError(f"{item.nodeid}: AIOKafkaProducer is {theirs!r}, "
                                    "not pyprod.aio's")
    exclusions = load_exclusions(EXCLUDED_FILE)
    hits = {item.nodeid: exclusion_for(item.nodeid, exclusions) for item in items}
    _deselected.update((nodeid, "excluded: " + hit[1]) for nodeid, hit in hits.items() if hit)
    _unused_exclusions[:] = sorted(set(exclusions) - {hit[0] for hit in hits.values() if hit})
    dropped = [item for item in items if hits[item.nodeid]]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not hits[item.nodeid]]


def pytest_terminal_summary(terminalreporter):
    for nodeid, reason in sorted(_deselected.items()):
        terminalreporter.line(f"excluded {nodeid}: {reason[len('excluded: '):]}")
    for entry in _unused_exclusions:
        terminalreporter.line(f"{EXCLUDED_FILE.name}: {entry} matches no collected test",
                              red=True)


@pytest.fixture(scope="session")
def kafka_server():
    """aiokafka's Docker broker has num.partitions=2 (test_producer_start counts them)."""
    cluster = KafkaCluster(nodes=1, broker_props={"num.partitions": 2},
                           version=BROKER_VERSION).start()
    try:
        yield cluster
    finally:
        cluster.stop(kill=True)


@pytest.fixture(scope="class")
def loop():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    if not loop.is_closed():
        loop.call_soon(loop.stop)
        loop.run_forever()
        loop.close()
    gc.collect()
    asyncio.set_event_loop(None)


@pytest.fixture(autouse=True)
def collect_garbage():
    yield
    gc.collect()


@pytest.fixture(scope="class")
def setup_test_class(request, loop, kafka_server):
    hosts = kafka_server.bootstrap_servers.split(",")
    host, _, port = hosts[0].rpartition(":")
    cls = request.cls
    cls.loop, cls.hosts, cls.kafka_host, cls.kafka_port = loop, hosts, host, int(port)
    cls.kafka_version = kafka_server.version
    for name in ("kafka_ssl_port", "kafka_sasl_plain_port", "kafka_sasl_ssl_port",
                 "ssl_folder", "acl_manager", "kerberos_utils", "kafka_config"):
        setattr(cls, name, None)


@pytest.fixture(scope="class")
def setup_test_class_serverless(request, loop):
    request.cls.loop = loop
