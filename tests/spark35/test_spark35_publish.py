"""pyprod.spark.publish on a real Spark 3.5 (docs/spark.md, "Spark 3.x"): driver.py runs in
the Spark 3.5 venv (tests/harness/spark35.py) against the suite's broker, once through
mapInArrow and once through the foreachPartition fallback; kafka-python reads everything
back. At-least-once with no task failure: every row arrives exactly once.

The driver runs with TZ=America/New_York, so a timestamp converted through the local time zone
(the Rows of the fallback) would show as a wrong epoch."""
import collections
import json
import os
import subprocess

import pytest
from kafka.partitioner.default import murmur2

import kcore
from tests.harness import readback

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "driver.py")
ROWS = 20_000
PARTITIONS = 4
BASE_TS = 1_650_000_000_000  # driver.BASE_TS
DRIVER_TIMEOUT = 900  # s; only against hangs


def run_driver(venv, tmp_path, **args):
    out = tmp_path / "report.json"
    cmd = [venv.python, DRIVER, "--out", str(out)]
    for k, v in args.items():
        cmd += ["--" + k, str(v)]
    p = subprocess.run(cmd, env=venv.env(TZ="America/New_York"), cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=DRIVER_TIMEOUT)
    if p.returncode or not out.exists():
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-60:])
        pytest.fail(f"the Spark 3.5 driver failed ({p.returncode}):\n{tail}")
    return json.loads(out.read_text())


def expected():
    """readback.Sent for each row of driver.frame (partitions are checked apart)."""
    out = []
    for i in range(ROWS):
        ts = BASE_TS + i if i % 7 != 6 else None
        out.append(readback.Sent(b"k%d" % i if i % 10 != 9 else None, b"v%d" % i,
                                 [("i", str(i).encode()), ("src", b"spark35")], ts))
    return out


def check_partitions(read):
    for r in read:
        i = int(r.value[1:])
        if i % 3 == 0:
            want = i % PARTITIONS  # the partition column
        elif r.key is not None:
            want = (murmur2(r.key) & 0x7FFFFFFF) % PARTITIONS  # Java's partitioner
        else:
            continue  # keyless and no partition: sticky, any partition
        assert r.partition == want, f"row {i} in partition {r.partition}, expected {want}"


@pytest.mark.parametrize("mode", ["arrow", "fallback"])
def test_publish_on_spark35(spark35, kafka, topic, tmp_path, mode):
    t = topic(PARTITIONS)
    report = run_driver(spark35, tmp_path, bootstrap=kafka.bootstrap_servers, topic=t,
                        rows=ROWS, partitions=PARTITIONS, mode=mode)

    # the versions asked for, and this checkout's pyprod with the suite's kcore
    assert report["spark"].startswith("3.5.") and report["pyspark"] == report["spark"]
    assert int(report["numpy"].split(".")[0]) < 2 and int(report["pandas"].split(".")[0]) < 3
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(DRIVER))), "src")
    assert report["pyprod_file"].startswith(src + os.sep), report["pyprod_file"]
    assert report["kcore"] == kcore.IMPLEMENTATION, report
    assert report["worker_kcore"] == [kcore.IMPLEMENTATION], report
    if os.environ.get("PYPROD_NO_EXTENSIONS") != "1":
        assert report["kcore"] == "compiled", report

    # register() refuses Spark 3 with the message it promises
    assert report["register_error"] is not None, "register(spark) did not raise on Spark 3.5"
    assert "Spark >= 4.0" in report["register_error"]
    assert "pyprod.spark.publish" in report["register_error"]

    # the path publish() took
    assert report["has_mapInArrow"] is True
    assert report["paths"] == ["publish_arrow" if mode == "arrow" else "publish_rows"]
    assert report["published"] == ROWS

    read = readback.read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=ROWS,
                                          timeout=120)
    values = collections.Counter(r.value for r in read)
    assert len(values) == ROWS and set(values.values()) == {1}, \
        f"{len(read)} records, {len(values)} distinct values"
    readback.compare(expected(), read)  # keys, values, headers, given timestamps
    now_rows = [r for r in read if int(r.value[1:]) % 7 == 6]
    assert all(r.timestamp > BASE_TS + ROWS for r in now_rows)  # null timestamp: the send time
    check_partitions(read)
