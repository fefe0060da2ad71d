"""bench/spark_sink.py's process-tree CPU accounting and its --cluster mode
(bench/_spark_cluster_sink.py): the pure functions on synthetic input (no timing assertions),
then one tiny real run on a Spark standalone cluster against the `kafka` fixture."""
import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import _spark_cluster_sink as cs  # noqa: E402
import spark_sink as sink  # noqa: E402


# pid: (ppid, own CPU ticks, rss pages)
SNAPSHOT = {1: (0, 5, 1),
            10: (1, 100, 50),    # an executor JVM
            11: (10, 20, 30),    # its pyspark daemon
            12: (11, 40, 20),    # a Python worker
            13: (11, 1, 25),     # another
            20: (1, 60, 40),     # a second executor JVM, no Python yet
            30: (1, 9, 5)}       # something else


def test_tree_usage_splits_the_roots_from_their_descendants():
    u = sink.tree_usage(SNAPSHOT, [10, 20])
    assert u["own"] == {10: 100, 20: 60}
    assert u["children"] == {11: 20, 12: 40, 13: 1}
    assert u["rss_own"] == 90 and u["rss_children"] == {11: 30, 12: 20, 13: 25}
    assert sink.tree_usage(SNAPSHOT, [99]) == {"own": {}, "children": {}, "rss_own": 0,
                                               "rss_children": {}}
    # a root that is also another root's descendant counts once, as a root
    both = sink.tree_usage(SNAPSHOT, [10, 11])
    assert both["own"] == {10: 100, 11: 20} and both["children"] == {12: 40, 13: 1}


def test_proc_meter_counts_each_process_to_its_last_sample(monkeypatch):
    """A worker that ends inside the window keeps the ticks it was last seen with (its parent,
    like pyspark's daemon, may never get them); one born inside counts from 0; no negatives."""
    snaps = iter([{10: (1, 100, 50), 11: (10, 30, 20)},                     # start
                  {10: (1, 110, 50), 11: (10, 45, 20), 12: (10, 5, 10)},    # a sample
                  {10: (1, 120, 50), 12: (10, 9, 12)}])                     # end: 11 gone
    monkeypatch.setattr(sink, "proc_snapshot", lambda: next(snaps))
    monkeypatch.setattr(sink, "machine_ticks", lambda: (0, 0))
    meter = sink.ProcMeter({"ex": [10]}, every=3600)
    with meter:
        meter._observe()  # the sampler's first sample (it waits `every` first)
    tick = sink._TICK
    assert meter.cpu["ex"] == {"own": 20 / tick, "children": (15 + 9) / tick}
    assert meter.peak["ex"]["children"] == 30 * sink._PAGE
    assert meter.peak["ex"]["child_max"] == 20 * sink._PAGE


def test_machine_ticks_from_proc_stat():
    text = "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"
    busy, total = sink.machine_ticks(text)
    assert (busy, total) == (100 + 5 + 50 + 3 + 2 + 1, 1181)  # guest (7) is inside user
    busy, total = sink.machine_ticks()  # this machine's
    assert 0 < busy <= total


def test_proc_meter_counts_a_child_process():
    with sink.ProcMeter({"me": [os.getpid()]}, every=0.05) as m:
        subprocess.run([sys.executable, "-c", "sum(range(30_000_000))"], check=True)
    assert m.cpu["me"]["children"] > 0 and m.cpu["me"]["own"] >= 0
    assert m.peak["me"]["total"] > 0 and m.machine_all_s >= m.machine_busy_s > 0
    f = m.fields()
    assert f["cpu_s"] == m.cpu["me"]["own"] + m.cpu["me"]["children"] and f["peak_rss_mb"] > 0


def test_connector_versions_from_jar_names(monkeypatch):
    import tests.harness.spark_kafka_jars as harness
    names = ["/c/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/c/kafka-clients-3.9.2.jar",
             "/c/spark-token-provider-kafka-0-10_2.13-4.2.0.jar", "/c/commons-pool2-2.13.1.jar"]
    monkeypatch.setattr(harness, "spark_kafka_jars", lambda: names)
    jars, versions = sink.connector_jars()
    assert jars == names
    assert versions == {sink.CONNECTOR: "4.2.0", sink.TOKEN: "4.2.0",
                        "kafka-clients": "3.9.2", "commons-pool2": "2.13.1"}


def test_check_landed():
    sink.check_landed({"client": sink.PYPROD, "landed": 100}, 100, parts=2)
    sink.check_landed({"client": sink.EOS, "landed": 112, "committed": 100}, 100, parts=2)
    # a retried task attempt's aborted records stay in the log, unread by read_committed
    sink.check_landed({"client": sink.EOS, "landed": 260, "committed": 100}, 100, parts=2)
    sink.check_landed({"client": sink.NOOP, "landed": None}, 100, parts=2)  # writes nothing
    for bad in ({"client": sink.PYPROD, "landed": 101}, {"client": sink.JVM, "landed": 99},
                {"client": sink.EOS, "landed": 113},  # more than one marker per partition+task
                {"client": sink.EOS, "landed": 112, "committed": 101}):
        with pytest.raises(SystemExit):
            sink.check_landed(dict(bad, topic="t"), 100, parts=2)


def _run(client, wall, rnd, cpu=(1.0, 0.5), probe=0.1, rows=1_000_000):
    return {"client": client, "wall_s": wall, "round": rnd, "landed": rows,
            "cpu_s": sum(cpu), "executor_jvm_cpu_s": cpu[0], "executor_python_cpu_s": cpu[1],
            "driver_cpu_s": 0.2, "broker_cpu_s": 0.4, "daemons_cpu_s": 0.01,
            "other_cpu_s": 0.09, "machine_busy_s": 2.0, "machine_all_s": 2.0 * wall,
            "peak_rss_mb": 900.0, "python_rss_sum_mb": 300.0 + rnd,
            "python_rss_max_mb": 120.0, "probe_wall_s": probe, "probe_first_wall_s": 2 * probe,
            "executors": 2}


def _runs():
    return ([_run(sink.PYPROD, w, i) for i, w in enumerate((1.0, 2.0, 1.25))]
            + [_run(sink.EOS, w, i, cpu=(1.0, 0.7)) for i, w in enumerate((1.25, 1.5, 4.0))]
            + [_run(sink.JVM, w, i, cpu=(4.0, 0.0), probe=0.2)
               for i, w in enumerate((4.0, 3.0, 5.0))])


def test_cluster_rows_medians_per_core_groups_and_shares():
    rows = cs.cluster_rows(_runs(), 1_000_000, cores=2)
    by = {r["client"]: r for r in rows}
    assert [r["client"] for r in rows] == [sink.PYPROD, sink.EOS, sink.JVM]
    p, j = by[sink.PYPROD], by[sink.JVM]
    assert p["records_per_s"] == 800_000 and p["records_per_s_per_core"] == 400_000
    assert p["cpu_s_per_m"] == 1.5 and j["cpu_s_per_m"] == 4.0
    assert (p["executor_jvm_cpu_s_per_m"], p["executor_python_cpu_s_per_m"]) == (1.0, 0.5)
    assert (j["executor_python_cpu_s_per_m"], p["driver_cpu_s_per_m"]) == (0.0, 0.2)
    assert p["broker_cpu_s_per_m"] == 0.4 and p["other_cpu_s_per_m"] == 0.09
    assert p["startup_share"] == round(0.1 / 1.25, 4) and j["startup_share"] == 0.05
    assert (p["probe_wall_s"], p["probe_first_wall_s"]) == (0.1, 0.2)
    assert p["python_rss_sum_mb"] == 302 and p["python_rss_max_mb"] == 120
    assert p["machine_busy_share"] == 0.8  # median of 2/2, 2/4, 2/2.5
    assert p["workload"].startswith("spark cluster 2 executor cores")
    meta = sink.ratios(rows)
    assert meta["ratio"] == pytest.approx(800_000 / 250_000)
    assert meta["cpu_ratio"] == pytest.approx(1.5 / 4.0)
    assert meta["eos_ratio"] == pytest.approx((1 / 1.5) / 0.8)
    # a broker given by address: its CPU unknown, the table says so
    runs = [dict(r, broker_cpu_s=None) for r in _runs()]
    assert cs.cluster_rows(runs, 1_000_000, 2)[0]["broker_cpu_s_per_m"] is None


def test_goals_and_markdown():
    rows = cs.cluster_rows(_runs(), 1_000_000, cores=2)
    meta = {"date": "2030-01-02T03:04:05+00:00", "command": "python bench/spark_sink.py "
            "--cluster 2", "machine": {"cpu_model": "Test CPU", "cores": 2, "os": "Linux",
                                       "python": "3.11"},
            "versions": {"pyprod": "0.1.0"}, "rounds": 3, "workload": "1,000,000 rows",
            "notes": ["a note"], **sink.ratios(rows)}
    goals = cs.goals(meta)
    assert [(g["target"], g["met"]) for g in goals] == [(2.0, True), (0.9, False)]
    md = cs.cluster_markdown(meta, rows)
    assert "| pyprod format(pyprod) | 800,000 | 400,000 | 1.5 | 0.20 | 302 / 120 | 8.0% |" in md
    assert "| Spark format(kafka) | 4.00 | 0.00 | 0.20 | 0.40 | 0.01 | 0.09 | 25% |" in md
    assert "= 3.20x** (goal >= 2.0x: met)" in md and "(goal >= 0.9x: missed)" in md
    assert md.count("\n| ") == 8 and md.endswith("- a note\n")  # 2 tables: a header, 3 rows
    partial = dict(meta, ratio=None, eos_ratio=None, cpu_ratio=None, eos_cpu_ratio=None)
    assert cs.goals(partial) == [] and "goal" not in cs.cluster_markdown(partial, rows[:1])


def test_cluster_view_attaches_without_owning(tmp_path):
    view = cs.ClusterView(str(tmp_path), 2)
    assert view.executor_pids() == {} and view.executor_logs("app-1") == {}
    with pytest.raises(RuntimeError):
        view.stop()
    assert os.path.isdir(tmp_path)


def test_cluster_arguments(capsys):
    args = sink.parse_args(["--cluster", "2", "--clients", "pyprod,kafka"])
    assert args.out.endswith("spark_sink_cluster") and args.client_list == [sink.PYPROD,
                                                                             sink.JVM]
    assert sink.parse_args([]).out.endswith(os.path.join("results", "spark_sink"))
    for bad in (["--cluster", "-1"], ["--executor-cores", "0"], ["--clients", "nope"]):
        with pytest.raises(SystemExit):
            sink.parse_args(bad)
    assert "unknown client" in capsys.readouterr().err


def test_tiny_cluster_run(kafka, tmp_path):
    """Two workers, the three sinks and noop, 20,000 rows, one round: every run checked (the
    exactlyOnce topic read to its end with read_committed), the executors' Python workers
    seen doing format("pyprod")'s work, the files written."""
    out = str(tmp_path / "cluster")
    assert sink.main(["--cluster", "2", "--rows", "20000", "--rounds", "1",
                      "--clients", "pyprod,pyprod-eos,kafka,noop",
                      "--bootstrap-servers", kafka.bootstrap_servers, "--out", out]) == 0
    data = json.loads(open(out + ".json").read())
    meta, runs = data[-1]["meta"], data[-1]["runs"]
    assert [r["client"] for r in data[:-1]] == [sink.PYPROD, sink.EOS, sink.JVM, sink.NOOP]
    assert meta["driver_root_is_jvm"] and meta["executor_cores"] == 2
    assert all(r["executors"] == 2 and r["probe_wall_s"] > 0 and r["probe_first_wall_s"] > 0
               for r in runs)
    assert [r["landed"] for r in runs if r["client"] == sink.NOOP] == [None]
    (eos,) = [r for r in runs if r["client"] == sink.EOS]
    assert eos["committed"] == 20000
    for r in runs:
        if r["client"] in (sink.PYPROD, sink.EOS):
            assert r["executor_python_cpu_s"] > 0 and r["python_rss_max_mb"] > 0
        assert r["executor_jvm_cpu_s"] > 0 and r["driver_cpu_s"] > 0
        assert r["broker_cpu_s"] is None  # a broker given by address
    md = open(out + ".md").read()
    assert "Where the CPU goes" in md and "records/s per executor core" in md
