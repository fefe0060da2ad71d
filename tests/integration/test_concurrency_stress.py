"""Issue 27's concurrency stress test: one KafkaProducer, six threads, a real Kafka broker.

Each round runs stress_round.py in its own process: send() and send_batch() (Arrow and lists,
keyless and keyed, headers) from six threads into 1 MiB of buffer, callbacks in reference cycles
with a gc.collect() loop, flush() from a thread, the topic grown 2 -> 8 -> 16 partitions during a
keyless send_batch, a values list changed during send_batch, a fork, close(). A crash is
reported with its signal and the stacks faulthandler printed. The topic is then read back with
confluent-kafka and checked byte for byte against the round's manifest (stress_check.verify).

Rounds run on the compiled kcore and on the pure twins (only the pure ones with
PYPROD_NO_EXTENSIONS=1; only the compiled ones, with fewer records, under scripts/sanitize.sh).
PYPROD_STRESS_SEED pins the first seed (printed in every report), PYPROD_STRESS_ROUNDS sets the
rounds per implementation; scripts/soak.py runs many more. -s shows the figures.
"""
import os

import pytest
from stress_check import run_round, sanitized, seeds_from_env, totals

import kcore

SANITIZED = sanitized()
IMPLS = ["compiled"] if SANITIZED else ["compiled", "pure"] if kcore.EXTENSIONS else ["pure"]
SEEDS = seeds_from_env(int(os.environ.get("PYPROD_STRESS_ROUNDS", "2")))
_results = []


@pytest.fixture(scope="module", autouse=True)
def _figures():
    yield
    if _results:
        print(f"\nstress: {totals(_results)}")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", SEEDS, ids=[f"round{i}" for i in range(len(SEEDS))])
def test_stress_round(kafka, topic, tmp_path, impl, seed):
    if type(kafka).__name__ != "KafkaCluster":
        pytest.fail(f"the stress rounds grow topics: they need Apache Kafka, not {kafka!r}")
    result = run_round(kafka.bootstrap_servers, topic(2), seed, impl, str(tmp_path),
                       small=SANITIZED, guard=600.0 if SANITIZED else 240.0)
    _results.append(result)
    print("\n" + result.report())
    assert result.ok, result.report()
