"""pyprod-perf (src/pyprod/perf.py): argument errors, config mapping, pacing and percentile
helpers, the final line's format, and small real runs read back with other clients."""
import os
import re
import subprocess
import sys
import time

import pytest

from pyprod import perf
from tests.harness.readback import read_all_confluent, read_all_kafka_python

FINAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms p50, ([\d.]+) ms p99, ([\d.]+) ms p99\.9, ([\d.]+) ms max latency "
    r"\((\d+) latency samples, 1 in (\d+) records\)\.$")

BASE = ["--topic", "t", "--num-records", "10", "--record-size", "10", "--throughput", "-1",
        "--bootstrap-servers", "127.0.0.1:1"]


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        perf.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pyprod-perf")
    return err


@pytest.mark.parametrize("argv, message", [
    (BASE[:-2],
     "one of the arguments --bootstrap-servers/--bootstrap-server --embedded is required"),
    (BASE + ["--embedded"], "not allowed with argument"),
    (["--topic", "t", "--num-records", "10", "--throughput", "-1", "--embedded"],
     "one of the arguments --record-size --payload-file is required"),
    (BASE + ["--payload-file", "x"], "not allowed with argument"),
    (["--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput", "-1",
      "--embedded"], "--num-records must be positive"),
    (["--topic", "t", "--num-records", "ten", "--record-size", "1", "--throughput", "-1",
      "--embedded"], "invalid int value: 'ten'"),
    (BASE[:4] + ["--record-size", "-5"] + BASE[6:], "--record-size must be positive"),
    (BASE[:6] + ["--throughput", "0"] + BASE[8:], "--throughput must be -1 (unlimited) or > 0"),
    (BASE[:6] + ["--throughput", "-2"] + BASE[8:], "--throughput must be -1"),
    (BASE + ["--acks", "2"], "argument --acks: invalid choice: '2'"),
    (BASE + ["--compression-type", "brotli"], "invalid choice: 'brotli'"),
    (BASE + ["--partitions", "3"], "--partitions needs --embedded"),
    (BASE + ["--latency-sample", "0"], "--latency-sample must be positive"),
    (BASE + ["--producer-config", "linger.ms"], "expected NAME=VALUE, got 'linger.ms'"),
    (BASE + ["--producer-config", "no.such.thing=1"], "Unrecognized producer config"),
    (BASE + ["--producer-config", "enable.idempotence=maybe"],
     "enable_idempotence must be true or false"),
    (BASE + ["--producer-config", "value.serializer=x"], "cannot be set from the command line"),
    (BASE + ["--producer-config", "linger.ms=soon"], "linger_ms must be a number"),
    (BASE + ["--producer-config", "batch.size=-1"], "batch_size must be >= 0"),
    (BASE + ["--acks", "1", "--producer-config", "enable.idempotence=true"],
     "enable_idempotence=True is incompatible with user-provided acks=1"),
    (BASE[:-1] + ["not a host:port"], "Bad port"),
])
def test_bad_arguments_are_usage_errors(capsys, argv, message):
    assert message in _usage_error(capsys, argv)


def test_missing_payload_file_is_a_usage_error(capsys, tmp_path):
    argv = BASE[:4] + ["--payload-file", str(tmp_path / "none.txt")] + BASE[6:]
    assert "No such file" in _usage_error(capsys, argv)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    argv = BASE[:4] + ["--payload-file", str(empty)] + BASE[6:]
    assert "has no payloads" in _usage_error(capsys, argv)


def test_module_entry_point_exits_2_on_bad_arguments():
    src = os.path.dirname(os.path.dirname(os.path.abspath(perf.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [src] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    out = subprocess.run([sys.executable, "-m", "pyprod.perf", "--topic", "t"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "the following arguments are required" in out.stderr


def test_unreachable_broker_exits_1(capsys):
    assert perf.main(BASE + ["--producer-config", "bootstrap.timeout.ms=500",
                             "--no-progress"]) == 1
    assert "no broker reachable at 127.0.0.1:1" in capsys.readouterr().err


def test_producer_config_maps_java_and_pyprod_names():
    cfg = perf.producer_config(["linger.ms=5", "batch_size=65536", "compression.type=lz4",
                                "enable.idempotence=false", "acks=all", "retries=3",
                                "client.id=perf-1", "max.in.flight.requests.per.connection=2"])
    assert cfg == {"linger_ms": 5, "batch_size": 65536, "compression_type": "lz4",
                   "enable_idempotence": False, "acks": "all", "retries": 3,
                   "client_id": "perf-1", "max_in_flight_requests_per_connection": 2}
    assert perf.producer_config(["compression.type=none"]) == {"compression_type": None}
    assert perf.producer_config([]) == {}


def test_pacer_sleeps_until_each_record_is_due():
    clock = [100.0]
    slept = []

    def sleep(d):
        slept.append(d)
        clock[0] += d

    pacer = perf.Pacer(50_000, sleep=sleep, clock=lambda: clock[0])
    assert pacer.step == 50
    pacer.begin()
    pacer.wait(50)  # 50 records at 50k/s are due after 1 ms
    assert slept == [pytest.approx(0.001)]
    clock[0] += 0.01  # behind schedule: no sleep
    pacer.wait(100)
    assert len(slept) == 1
    with pytest.raises(ValueError):
        perf.Pacer(0)
    with pytest.raises(ValueError):
        perf.Pacer(True)


def test_percentiles_and_summary_line():
    samples = [i / 1000 for i in range(1, 1001)]  # 1..1000 ms
    p50, p99, p999 = perf.percentiles(samples)
    assert (p50, p99, p999) == (0.501, 0.991, 1.0)
    lat = perf.latency_summary(samples)
    assert lat["samples"] == 1000 and lat["max_ms"] == pytest.approx(1000.0)
    assert lat["avg_ms"] == pytest.approx(500.5)
    s = dict(lat, records=1000, records_per_s=1234.5, mb_per_s=0.12, stride=1)
    m = FINAL.match(perf.format_summary(s))
    assert m, perf.format_summary(s)
    assert m.group(1) == "1000" and m.group(10) == "1"
    assert perf.default_sample_stride(1_000_000, 50_000) == 1
    assert perf.default_sample_stride(1_000_000, -1) == 64
    assert perf.default_sample_stride(10_000_000, -1) == 200


def _run(capsys, argv):
    t0 = int(time.time() * 1000)
    rc = perf.main(argv)
    t1 = int(time.time() * 1000)
    out = capsys.readouterr()
    assert rc == 0, out.err
    lines = out.out.strip().splitlines()
    m = FINAL.match(lines[0])
    assert m, out.out
    return m, out, t0, t1


def _check_partitions(records):
    by_part = {}
    for r in records:
        by_part.setdefault(r.partition, []).append(r.offset)
    for offs in by_part.values():  # nothing lost or duplicated inside a partition
        assert offs == list(range(len(offs)))


def test_tiny_run_against_kafka(kafka, topic, capsys):
    t = topic()
    n = 3000
    m, out, t0, t1 = _run(capsys, [
        "--bootstrap-servers", kafka.bootstrap_servers, "--topic", t, "--num-records", str(n),
        "--record-size", "50", "--throughput", "-1", "--acks", "1",
        "--producer-config", "linger.ms=5", "batch.size=4096", "--no-progress", "--json"])
    assert int(m.group(1)) == n and int(m.group(10)) == 64
    assert int(m.group(9)) == -(-n // 64)  # one sample per 64 records, the first included
    assert float(m.group(2)) > 0 and float(m.group(5)) <= float(m.group(6))
    records = read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=n)
    assert len(records) == n
    values = {r.value for r in records}
    assert len(values) == 1 and len(values.pop()) == 50
    assert all(r.key is None and r.headers == [] and t0 <= r.timestamp <= t1 for r in records)
    _check_partitions(records)
    assert len({r.partition for r in records}) > 1  # sticky partitioner moved on


def test_paced_payload_file_run_with_compression(kafka, topic, capsys, tmp_path):
    t = topic(partitions=3)
    payloads = [b"alpha", b"bravo charlie", "delta \u00e9cho".encode()]
    f = tmp_path / "payloads.txt"
    f.write_bytes(b"\n".join(payloads) + b"\n")
    n = 2000
    m, out, t0, t1 = _run(capsys, [
        "--bootstrap-servers", kafka.bootstrap_servers, "--topic", t, "--num-records", str(n),
        "--payload-file", str(f), "--throughput", "20000", "--acks", "all",
        "--compression-type", "zstd", "--no-progress", "--reporting-interval", "20"])
    assert int(m.group(9)) == n  # paced below 100k/s: every record sampled
    assert "records sent" in out.err  # periodic progress lines without a tty
    records = read_all_confluent(kafka.bootstrap_servers, t, expected_count=n)
    assert len(records) == n
    assert {r.value for r in records} == set(payloads)  # random picks: all three show up
    assert all(r.key is None and t0 <= r.timestamp <= t1 for r in records)
    _check_partitions(records)
