"""kafka-python's own producer tests, with pyprod.KafkaProducer swapped in, all pass.

Runs scripts/kafka_python_tests.py in a subprocess (it starts its own one-node Kafka). Tests
listed in tests/compat/kafka_python_excluded.txt (they read kafka-python internals) are not run;
every other kafka-python test that uses KafkaProducer must pass, and every exclusion must still
name a test. Deselect with ``-m "not kafka_python_suite"``.
"""
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.compat.kafka_python_conftest import (EXCLUDED_FILE, exclusion_for, load_exclusions,
                                                producer_tests)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kafka_python_tests.py"


def _script():
    spec = importlib.util.spec_from_file_location("kafka_python_tests", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_swap_imports():
    swap = _script().swap_imports
    source = textwrap.dedent("""\
        \"\"\"doc\"\"\"
        from __future__ import annotations
        import kafka
        import kafka.errors as Errors
        from kafka import (TopicPartition,
                           KafkaProducer as KP)
        from kafka.errors import KafkaTimeoutError
        from kafka.producer.kafka import KafkaProducer


        def helper():
            from kafka import errors, KafkaConsumer
            return kafka.KafkaProducer, kafka.producer.KafkaProducer
        """)
    text, n = swap(source)
    assert n == 7
    assert text == textwrap.dedent("""\
        \"\"\"doc\"\"\"
        from __future__ import annotations
        import pyprod
        import kafka
        import pyprod.errors as Errors
        from kafka import TopicPartition
        from pyprod import KafkaProducer as KP
        from pyprod.errors import KafkaTimeoutError
        from pyprod import KafkaProducer


        def helper():
            from kafka import KafkaConsumer
            from pyprod import errors
            return pyprod.KafkaProducer, pyprod.KafkaProducer
        """)
    kept, n = swap(source, errors=False)
    assert n == 4 and "import kafka.errors as Errors" in kept and "from kafka import errors" in kept
    with pytest.raises(AssertionError, match="cannot swap"):
        swap("import kafka.errors\n")


def test_which_tests_use_the_producer():
    found = producer_tests(textwrap.dedent("""\
        from pyprod import KafkaProducer

        def _make(**kw):
            return KafkaProducer(**kw)

        def fixture_like(other):
            return _make()

        def test_direct(): KafkaProducer()
        def test_helper(): _make()
        def test_fixture(fixture_like): pass
        def test_factory(kafka_producer_factory): pass
        def test_alone(broker): assert broker

        class TestX:
            def _p(self): return KafkaProducer.max_usable_produce_magic((4, 0))
            def test_method(self): self._p()
            def test_other(self): pass
        """))
    assert {k for k, v in found.items() if v} == {
        (None, "_make"), (None, "fixture_like"), (None, "test_direct"), (None, "test_helper"),
        (None, "test_fixture"), (None, "test_factory"), ("TestX", "_p"), ("TestX", "test_method")}


def test_exclusion_matching():
    entries = {"t.py::TestA": "a", "t.py::test_b": "b"}
    assert exclusion_for("t.py::TestA::test_x[1]", entries) == ("t.py::TestA", "a")
    assert exclusion_for("t.py::test_b[gzip]", entries) == ("t.py::test_b", "b")
    assert exclusion_for("t.py::test_bb", entries) is None
    assert exclusion_for("t.py::TestAB::test_x", entries) is None


def test_exclusions_file_is_well_formed():
    exclusions = load_exclusions()
    assert exclusions, EXCLUDED_FILE
    for nodeid, reason in exclusions.items():
        assert nodeid.startswith("test/") and "::" in nodeid, nodeid
        assert len(reason) > 20, (nodeid, reason)


@pytest.mark.kafka_python_suite
def test_kafka_python_producer_tests_pass(tmp_path):
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json", str(results)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    summary = "\n".join(line for line in proc.stdout.splitlines()
                        if not line.startswith(("passed ", "excluded ")))[-6000:]
    assert results.exists(), \
        f"no results (exit {proc.returncode}):\n{summary}\n{proc.stderr[-3000:]}"
    data = json.loads(results.read_text())
    tests = data["tests"]
    bad = {nodeid: t for nodeid, t in tests.items()
           if t["outcome"] not in ("passed", "deselected")}
    assert not bad, "kafka-python tests that did not pass on pyprod:\n" + "\n".join(
        f"{nodeid}: {t['outcome']}: {(t.get('message') or '').strip()[-1500:]}"
        for nodeid, t in sorted(bad.items()))
    assert not data["unused_exclusions"], data["unused_exclusions"]
    passed = [nodeid for nodeid, t in tests.items() if t["outcome"] == "passed"]
    # the broker-backed producer tests ran (not only the unit tests)
    assert any(n.startswith("test/integration/test_producer_integration.py::") for n in passed)
    assert any("transactional" in n for n in passed), passed
    assert proc.returncode == 0, summary
