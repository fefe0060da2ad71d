"""Executor loss on a Spark standalone cluster: an executor JVM is SIGKILLed (with its Python
workers) in the middle of a write; Spark reschedules its tasks on the other executor. With
exactlyOnce every row is committed once and no transaction is left open; at-least-once every
row arrives (some twice)."""
import collections
import time

import pytest

from tests.harness.readback import assert_no_open_transaction, end_offsets
from tests.spark_cluster.test_cluster_writes import counts


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.2)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_an_executor_killed_mid_write(spark_cluster, submit, kafka, topic, exactly_once):
    t, n, bootstrap = topic(), 20_000, kafka.bootstrap_servers
    # 4 tasks of 5,000 rows, 250 ms per Arrow batch of 500: each task writes for 2.5 s or more
    app = submit(bootstrap=bootstrap, topic=t, rows=n, partitions=4, slow_ms=250,
                 exactly_once=exactly_once)
    app_id = app.wait_app_id()
    wait_for(lambda: sum(end_offsets(bootstrap, t, False).values()) > 0, 300,
             "the first rows in Kafka")
    executors = spark_cluster.executor_pids(app_id)
    assert len(executors) == 2, executors
    victim = sorted(executors)[0]
    spark_cluster.kill_executor(victim)
    app.wait()
    log = app.log()
    assert "Lost executor %s" % executors[victim][1] in log
    assert "Lost task" in log  # its running task was rescheduled
    if exactly_once:
        assert counts(bootstrap, t, n) == collections.Counter(range(n))
        assert_no_open_transaction(bootstrap, t)
        assert sum(end_offsets(bootstrap, t, False).values()) >= n
    else:
        got = counts(bootstrap, t, n)
        assert set(got) == set(range(n)), sorted(set(range(n)) - set(got))[:10]
