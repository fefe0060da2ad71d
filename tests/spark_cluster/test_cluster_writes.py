"""format("pyprod") on a Spark standalone cluster (two workers, an executor JVM each, each
with its own Python workers), jobs sent with spark-submit: batch and streaming writes,
at-least-once and exactlyOnce, read back by kafka-python; the producer cache per Python
worker, seen in what the workers log when their executor shuts down."""
import collections
import re

import pytest

from tests.harness import readback
from tests.harness.readback import assert_no_open_transaction

SHUTDOWN = re.compile(r"^(\d+) pyprod\.spark .*executor shutdown \((.*)\): closed (\d+) "
                      r"producers \(created (\d+), acquired (\d+), closed (\d+)", re.M)


def counts(bootstrap, topic, n, committed=True):
    """Counter of the row ids read back (keys checked against the ids)."""
    records = readback.read_all_kafka_python(
        bootstrap, topic, expected_count=n, timeout=120,
        isolation_level="read_committed" if committed else "read_uncommitted")
    for r in records:
        assert r.key == b"k%d" % (int(r.value) % 97)
    return collections.Counter(int(r.value) for r in records)


def shutdowns(cluster, app_id):
    """{executor id: [(pid, why, closed now, created, acquired, closed)]} from the workers'
    pyprod.spark logs (tests/spark_cluster/site)."""
    out = {}
    for ex, text in cluster.executor_logs(app_id, "pyprod-python.log").items():
        out[ex] = [(int(m[0]), m[1]) + tuple(int(x) for x in m[2:])
                   for m in SHUTDOWN.findall(text)]
    return out


def test_batch_writes_share_one_producer_per_python_worker(spark_cluster, submit, kafka,
                                                          topic):
    t, n, partitions, writes = topic(), 12_000, 6, 3
    app = submit(bootstrap=kafka.bootstrap_servers, topic=t, rows=n, partitions=partitions,
                 writes=writes)
    result = app.wait()
    assert counts(kafka.bootstrap_servers, t, n * writes) == \
        collections.Counter({i: writes for i in range(n)})
    by_executor = shutdowns(spark_cluster, result["app_id"])
    assert len(by_executor) == 2 and all(by_executor.values()), by_executor
    # a worker's last line (its SIGHUP and its socket closing can both report, racing)
    last = {pid: line for lines in by_executor.values() for pid, *line in lines}
    writers = [line for line in last.values() if line[3]]   # (why, now, created, acquired, closed)
    # one producer per Python worker and settings, reused by every task of that worker
    # (three jobs), closed by the time the worker left with its executor
    assert all(created == 1 and closed == created
               for _, _, created, _, closed in writers), by_executor
    assert sum(w[3] for w in writers) == partitions * writes
    assert len(writers) < partitions * writes


def test_batch_exactly_once_across_executors(spark_cluster, submit, kafka, topic):
    t, n = topic(), 12_000
    submit(bootstrap=kafka.bootstrap_servers, topic=t, rows=n, partitions=6,
           exactly_once=True).wait()
    assert counts(kafka.bootstrap_servers, t, n) == collections.Counter(range(n))
    assert_no_open_transaction(kafka.bootstrap_servers, t)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_streaming_across_executors(spark_cluster, submit, kafka, topic, exactly_once):
    t, n, files = topic(), 8_000, 4
    result = submit(bootstrap=kafka.bootstrap_servers, topic=t, rows=n, files=files,
                    stream=True, exactly_once=exactly_once).wait()
    assert result["batches"] == files
    assert counts(kafka.bootstrap_servers, t, n) == collections.Counter(range(n))
    assert_no_open_transaction(kafka.bootstrap_servers, t)
