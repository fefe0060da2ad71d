"""Fixtures and hooks for running kafka-python's own producer tests against pyprod.

``scripts/kafka_python_tests.py`` copies kafka-python's test files into a work directory with
``KafkaProducer`` swapped for ``pyprod.KafkaProducer`` and writes a ``conftest.py`` there that
star-imports this module (as tests/conftest.py does with tests/harness/fixtures.py). kafka-python's
own integration conftest starts brokers its own way (a downloaded Kafka, ZooKeeper); this
replaces it with the fixtures its producer tests use, backed by our KafkaCluster:

kafka_broker              one-node Apache Kafka (tests.harness.kafka_cluster.KafkaCluster), session-scoped,
                          num.partitions=4 as kafka-python's fixture sets
topic                     a new 4-partition topic's name (kafka-python's meaning, not tests/'s
                          factory)
kafka_producer_factory    ``with factory(**configs) as p``: a pyprod.KafkaProducer on kafka_broker
producer                  one such producer
kafka_consumer_factory, consumer, kafka_admin_client_factory, kafka_admin_client, send_messages
                          as kafka-python's conftest (consumers and admin clients are
                          kafka-python's own: only the producer is swapped)

KAFKA_VERSION (kafka-python's test switch, read when its test modules are imported) is set to
our broker's version. kafka-python's unit tests build producers on the default bootstrap, or
on its in-memory MockBroker's default address ("localhost", port 9092 for both), with no
broker; here both are a reserved 127.0.0.1 port that refuses connections, so nothing reaches
whatever may listen on 9092.

Collection keeps the tests that use KafkaProducer (found in the test's source, the helpers and
fixtures it reaches, or a producer fixture) minus those listed in kafka_python_excluded.txt;
the rest are deselected, each with its reason. With PYPROD_KP_RESULTS set, every test's outcome
and reason is written there as JSON at the end of the session.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import random
import re
import socket
import string
import uuid
from pathlib import Path

import pytest

import pyprod.config
from pyprod import KafkaProducer
from tests.harness.kafka_cluster import KafkaCluster
from pyprod.local_broker.jars import DEFAULT_KAFKA_VERSION

EXCLUDED_FILE = Path(__file__).with_name("kafka_python_excluded.txt")
BROKER_VERSION = os.environ.get("PYPROD_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION

# Fixtures (ours, kafka-python's names) that give a test a pyprod producer.
PRODUCER_FIXTURES = frozenset(("producer", "kafka_producer_factory", "send_messages"))
NOT_APPLICABLE = ("does not use KafkaProducer: tests kafka-python's own classes, which the "
                  "import swap leaves as they are")


def load_exclusions(path: Path = EXCLUDED_FILE) -> dict[str, str]:
    """``node id | reason`` lines (# comments) -> {node id: reason}. An id also matches its
    parametrized variants (``id[...]``) and, for a class, its tests (``id::...``)."""
    out = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        nodeid, sep, reason = (part.strip() for part in line.partition("|"))
        if not sep or not nodeid or not reason:
            raise ValueError(f"{path}:{lineno}: want 'node id | reason', got {line!r}")
        out[nodeid] = reason
    return out


def exclusion_for(nodeid: str, exclusions: dict[str, str]) -> tuple[str, str] | None:
    """The (entry, reason) of ``exclusions`` that covers ``nodeid``, or None."""
    for entry, reason in exclusions.items():
        if nodeid == entry or nodeid.startswith((entry + "[", entry + "::")):
            return entry, reason
    return None


def producer_tests(source: str) -> dict[tuple[str | None, str], bool]:
    """{(class or None, function): uses KafkaProducer} for every function of a test module.

    A function uses it if ``KafkaProducer`` is named in it, in a module-level function or a
    method of its own class that it reaches by name (helpers, fixtures), or if it takes a
    producer fixture."""
    tree = ast.parse(source)
    module_funcs = {}
    classes = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module_funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = {n.name: n for n in node.body
                                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def uses(func, methods):
        todo, seen = [func], set()
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            args = node.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            if params & PRODUCER_FIXTURES:
                return True
            for n in ast.walk(node):
                name = n.id if isinstance(n, ast.Name) else \
                    n.attr if isinstance(n, ast.Attribute) else None
                if name == "KafkaProducer":
                    return True
                for pool in (module_funcs, methods):
                    if name in pool:
                        todo.append(pool[name])
            todo.extend(module_funcs[p] for p in params if p in module_funcs)  # fixtures
            todo.extend(methods[p] for p in params if p in methods)
        return False

    out = {(None, name): uses(f, {}) for name, f in module_funcs.items()}
    for cls, methods in classes.items():
        out.update(((cls, name), uses(f, methods)) for name, f in methods.items())
    return out


def pytest_configure(config):
    os.environ["KAFKA_VERSION"] = BROKER_VERSION  # before kafka-python's test modules import


# -- collection: which tests run --------------------------------------------------------------
_deselected: dict[str, str] = {}  # node id -> reason
_results: dict[str, dict] = {}


_unused_exclusions: list[str] = []


def pytest_collection_modifyitems(session, config, items):
    exclusions = load_exclusions()
    used = set()
    analysed = {}
    keep, drop = [], []
    for item in items:
        theirs = getattr(getattr(item, "module", None), "KafkaProducer", KafkaProducer)
        if theirs is not KafkaProducer:
            raise pytest.UsageError(f"{item.nodeid}: KafkaProducer is {theirs!r}, not pyprod's")
        path = Path(str(item.path))
        if path not in analysed:
            analysed[path] = producer_tests(path.read_text())
        key = (item.cls.__name__ if getattr(item, "cls", None) else None,
               getattr(item, "originalname", item.name))
        hit = exclusion_for(item.nodeid, exclusions)
        if not analysed[path].get(key, True):
            _deselected[item.nodeid] = "n/a: " + NOT_APPLICABLE
            drop.append(item)
        elif hit:
            _deselected[item.nodeid] = "excluded: " + hit[1]
            used.add(hit[0])
            drop.append(item)
        else:
            keep.append(item)
    _unused_exclusions[:] = sorted(set(exclusions) - used)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collectreport(report):
    if report.failed:  # a test module that does not import: its tests never run
        _results[report.nodeid] = {"outcome": "error", "when": "collect",
                                   "message": report.longreprtext[-4000:]}


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed"})
    if report.failed:
        if entry["outcome"] == "passed":
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["when"] = report.when
            entry["message"] = report.longreprtext[-4000:]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        longrepr = report.longrepr
        entry["message"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("PYPROD_KP_RESULTS")
    if not path:
        return
    tests = {nodeid: {"outcome": "deselected", "message": reason}
             for nodeid, reason in _deselected.items()}
    tests.update(_results)
    with open(path, "w") as f:
        json.dump({"broker_version": BROKER_VERSION, "tests": tests,
                   "unused_exclusions": _unused_exclusions}, f, indent=1, sort_keys=True)


def pytest_terminal_summary(terminalreporter):
    excluded = {k: v for k, v in _deselected.items() if v.startswith("excluded:")}
    n_a = len(_deselected) - len(excluded)
    tr = terminalreporter
    if excluded:
        tr.section("kafka-python tests excluded (they read kafka-python internals)")
        for nodeid, reason in sorted(excluded.items()):
            tr.line(f"{nodeid}: {reason[len('excluded: '):]}")
    if n_a:
        tr.line(f"{n_a} kafka-python tests not run: {NOT_APPLICABLE}")
    for entry in _unused_exclusions:
        tr.line(f"{EXCLUDED_FILE.name}: {entry} matches no collected test", red=True)


# -- fixtures ----------------------------------------------------------------------------------
def random_string(length):
    return "".join(random.choice(string.ascii_letters) for _ in range(length))


def env_kafka_version():
    return tuple(int(p) for p in os.environ["KAFKA_VERSION"].split("."))


@pytest.fixture(scope="session", autouse=True)
def _no_broker_refuses():
    """The default bootstrap_servers, and the address kafka-python's in-memory MockBroker
    gives by default: a bound, never listening 127.0.0.1 port (connections are refused).
    MockBroker's address is only a label for kafka-python's own client; pyprod, which has
    its own network client, would otherwise connect to it for real."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    saved = pyprod.config.DEFAULTS["bootstrap_servers"]
    pyprod.config.DEFAULTS["bootstrap_servers"] = "127.0.0.1:%d" % port
    init = mock_defaults = None
    with contextlib.suppress(ImportError):
        from test.mock_broker import MockBroker  # kafka-python's test package, when present
        init = MockBroker.__init__
        mock_defaults = init.__defaults__
        names = init.__code__.co_varnames[1:init.__code__.co_argcount]
        defaults = dict(zip(names[-len(mock_defaults):], mock_defaults), host="127.0.0.1",
                        port=port)
        init.__defaults__ = tuple(defaults[n] for n in names[-len(mock_defaults):])
    yield
    if init is not None:
        init.__defaults__ = mock_defaults
    pyprod.config.DEFAULTS["bootstrap_servers"] = saved
    sock.close()


@pytest.fixture(scope="session")
def kafka_broker():
    cluster = KafkaCluster(nodes=1, broker_props={"num.partitions": 4}, version=BROKER_VERSION)
    cluster.start()
    yield cluster
    cluster.stop(kill=True)


def _client_params(kafka_broker, **params):
    params.setdefault("api_version", env_kafka_version())
    params["bootstrap_servers"] = kafka_broker.bootstrap_servers
    return params


@pytest.fixture
def topic(kafka_broker, request):
    name = re.sub(r"[^a-zA-Z0-9._-]", "", request.node.name)[:200] + "_" + random_string(10)
    return kafka_broker.create_topic(name, 4)


@contextlib.contextmanager
def _closing_factory(make):
    """kafka-python's factory fixtures: ``with factory(**kw) as client``, and whatever a test
    left open is closed at teardown."""
    made = []

    @contextlib.contextmanager
    def factory(*args, **kwargs):
        client = make(*args, **kwargs)
        made.append(client)
        try:
            yield client
        finally:
            client.close()

    try:
        yield factory
    finally:
        for client in made:
            with contextlib.suppress(Exception):
                client.close()


@pytest.fixture
def kafka_producer_factory(kafka_broker, request):
    def make(**configs):
        params = {"client_id": f"{request.node.name}_{random_string(4)}"}
        params.update(configs)
        return KafkaProducer(**_client_params(kafka_broker, **params))

    with _closing_factory(make) as factory:
        yield factory


@pytest.fixture
def producer(kafka_producer_factory):
    with kafka_producer_factory() as p:
        yield p


@pytest.fixture
def kafka_consumer_factory(kafka_broker, request):
    from kafka import KafkaConsumer

    def make(topics=None, **configs):
        if topics is None:  # kafka-python's default: the test's `topic`, made on first use
            topics = (request.getfixturevalue("topic"),)
        params = {"client_id": f"{request.node.name}_{random_string(4)}",
                  "heartbeat_interval_ms": 500, "auto_offset_reset": "earliest"}
        params.update(configs)
        return KafkaConsumer(*topics, **_client_params(kafka_broker, **params))

    with _closing_factory(make) as factory:
        yield factory


@pytest.fixture
def consumer(kafka_consumer_factory):
    with kafka_consumer_factory() as c:
        yield c


@pytest.fixture
def kafka_admin_client_factory(kafka_broker):
    from kafka import KafkaAdminClient

    def make(**configs):
        params = {"client_id": f"admin_{random_string(4)}"}
        params.update(configs)
        return KafkaAdminClient(**_client_params(kafka_broker, **params))

    with _closing_factory(make) as factory:
        yield factory


@pytest.fixture
def kafka_admin_client(kafka_admin_client_factory):
    with kafka_admin_client_factory() as c:
        yield c


@pytest.fixture
def send_messages(topic, producer, request):
    """kafka-python's: send(number_range, partition) -> the values sent, all acknowledged."""
    def _send_messages(number_range, partition=0, topic=topic, producer=producer):
        sent = []
        for i in number_range:
            value = f"{i}-{request.node.name}-{uuid.uuid4()}".encode()
            sent.append((value, producer.send(topic, value=value, partition=partition)))
        producer.flush()
        for _, future in sent:
            assert future.succeeded()
        return [value for value, _ in sent]

    return _send_messages
