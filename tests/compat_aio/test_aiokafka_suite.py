"""aiokafka's own producer tests, with pyprod.aio.AIOKafkaProducer swapped in, all pass.

Runs scripts/aiokafka_tests.py (its pytest runs in a subprocess, with its own one-node Kafka). Tests listed
in tests/compat_aio/aiokafka_excluded.txt (they read or mock aiokafka internals) are not run;
every other test must pass, and every exclusion must still name a test. Deselect with
``-m "not aiokafka_suite"``.
"""
import json
import runpy
import textwrap
from pathlib import Path

import pytest

from tests.compat.kafka_python_conftest import load_exclusions
from tests.compat_aio.aiokafka_conftest import EXCLUDED_FILE

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "aiokafka_tests.py"


def test_swap_imports():
    swap = runpy.run_path(str(SCRIPT))["swap_imports"]
    source = textwrap.dedent("""\
        from aiokafka.errors import ProducerClosed
        from aiokafka.producer import AIOKafkaProducer
        from aiokafka import (AIOKafkaConsumer,
                              AIOKafkaProducer as P)
        """)
    text, n = swap(source)
    assert n == 2
    assert text == textwrap.dedent("""\
        from aiokafka.errors import ProducerClosed
        from pyprod.aio import AIOKafkaProducer
        from aiokafka import AIOKafkaConsumer
        from pyprod.aio import AIOKafkaProducer as P
        """)
    with pytest.raises(AssertionError, match="not swapped"):
        swap("import aiokafka\naiokafka.AIOKafkaProducer\n")


def test_exclusions_file_is_well_formed():
    exclusions = load_exclusions(EXCLUDED_FILE)
    assert exclusions
    for nodeid, reason in exclusions.items():
        assert nodeid.startswith("aiokafka_tests/test_") and "::" in nodeid, nodeid
        assert len(reason) > 20, (nodeid, reason)


@pytest.mark.aiokafka_suite
def test_aiokafka_producer_tests_pass(tmp_path, capsys):
    results = tmp_path / "results.json"
    rc = runpy.run_path(str(SCRIPT))["main"](["--json", str(results)])
    printed = capsys.readouterr()
    assert results.exists(), f"no results (exit {rc}):\n{printed.out[-3000:]}{printed.err[-3000:]}"
    data = json.loads(results.read_text())
    outcomes = {nodeid: t["outcome"] for nodeid, t in data["tests"].items()}
    bad = [f"{nodeid}: {data['tests'][nodeid].get('message', '')[-1500:]}"
           for nodeid, outcome in sorted(outcomes.items())
           if outcome not in ("passed", "deselected")]
    assert not bad, "aiokafka tests that did not pass on pyprod.aio:\n" + "\n".join(bad)
    assert not data["unused_exclusions"], data["unused_exclusions"]
    assert "passed" in {o for n, o in outcomes.items() if "transactional" in n}
    assert rc == 0, printed.out[-6000:]
