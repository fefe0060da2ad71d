"""The benchmark tooling in bench/ (compare.py, scaling.py, producer_peers.py): summaries,
tables, JSON, charts and the Spark merge on synthetic rows (no timing assertions), argument
errors, and one tiny real run of one client against the `kafka` fixture."""
import importlib.util
import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")


def _load(name):
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)  # scaling.py and producer_peers.py import compare
    spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def compare():
    return _load("compare")


@pytest.fixture(scope="module")
def scaling():
    return _load("scaling")


META = {"date": "2030-01-02T03:04:05+00:00", "command": "python bench/compare.py --quick",
        "machine": {"cpu_model": "Test CPU 9000", "cores": 2, "os": "Linux", "python": "3.11"},
        "versions": {"pyprod": "0.1.0 (git abc, compiled)", "confluent-kafka": "2.16.1"},
        "rounds": 3, "records": 1000, "skipped": {"java / 100B-keyed": "no keys"}}


def _run(client, workload, wall, cpu, rnd, records=1000, rate=None, p99=None, size=100,
         send_s=None):
    r = {"client": client, "workload": workload, "records": records, "wall_s": wall,
         "cpu_s": cpu, "value_size": size, "rate": rate, "peak_rss_mb": 40.0 + rnd,
         "round": rnd, "partitions": 6, "threads": 1}
    if rate:
        r["p99_ms"] = p99
        if send_s:
            r["send_s"] = send_s
    return r


def _runs():
    runs = []
    for rnd, (a, b) in enumerate([(1.0, 2.0), (0.5, 2.5), (2.0, 1.5)]):
        runs.append(_run("pyprod", "100B", a, 0.5, rnd))
        runs.append(_run("confluent-kafka", "100B", b, 1.0, rnd))
        runs.append(_run("java", "100B", 4.0, 9.0, rnd))
        runs.append(_run("pyprod", "100B", 0.02, 0.01, rnd, rate=50_000, p99=10 + rnd))
        runs.append(_run("confluent-kafka", "100B", 0.05, 0.01, rnd, rate=50_000, p99=5,
                         send_s=0.04))  # reached 25k/s of the 50k offered
    return runs


def test_summarize_medians_and_flags(compare):
    rows = {(r["client"], r["workload"]): r for r in compare.summarize(_runs())}
    p = rows[("pyprod", "100B")]
    assert p["records_per_s"] == 1000.0 and p["min_records_per_s"] == 500.0
    assert p["max_records_per_s"] == 2000.0 and p["rounds"] == 3
    assert p["cpu_s_per_m"] == pytest.approx(500.0)
    assert p["mb_per_s"] == pytest.approx(1000 * 100 / 2 ** 20)
    assert p["peak_rss_mb"] == 42.0  # the largest of the rounds
    assert p["p99_ms"] == 11 and p["latency_saturated"] is False
    c = rows[("confluent-kafka", "100B")]
    assert c["records_per_s"] == 500.0 and c["latency_saturated"] is True
    assert c["latency_achieved_per_s"] == pytest.approx(25_000)
    assert rows[("java", "100B")]["cpu_is_whole_jvm"] is True
    assert [r["client"] for r in compare.summarize(_runs())] == \
        ["pyprod", "confluent-kafka", "java"]


def test_markdown_has_labels_ratios_and_notes(compare):
    md = compare.markdown(META, compare.summarize(_runs()))
    assert "2030-01-02T03:04:05+00:00" in md and "Test CPU 9000, 2 cores" in md
    assert "pyprod 0.1.0 (git abc, compiled)" in md and "confluent-kafka 2.16.1" in md
    lines = [s for s in md.splitlines() if s.startswith("| 100B | confluent-kafka")]
    assert len(lines) == 1 and "| 2.00x, 0.50x |" in lines[0] and "†" in lines[0]
    java = [s for s in md.splitlines() if s.startswith("| 100B | java")][0]
    assert "\\*" in java and "| 4.00x |" in java
    assert "Not run: java / 100B-keyed: no keys." in md


def test_spark_rows_are_merged_and_labelled(compare, tmp_path):
    rows = compare.summarize(_runs())
    spark_row = {"client": "pyprod.spark", "workload": "spark-100B", "records": 10_000,
                 "records_per_s": 5000.0, "mb_per_s": 0.5, "cpu_s_per_m": 3.0,
                 "peak_rss_mb": 300.0, "p99_ms": None}
    path = tmp_path / "spark_sink.json"
    path.write_text(json.dumps([spark_row, {"meta": {"date": "2029-12-31T10:00:00"}}]))
    merged = compare.merge_spark(rows, META, str(path))
    assert len(merged) == len(rows) + 1
    assert merged[-1]["measured_separately"] == "2029-12-31"
    md = compare.markdown(META, merged)
    assert "pyprod.spark (measured separately, 2029-12-31)" in md
    assert "measured separately (another date)" in md
    path.write_text(json.dumps([spark_row, {"meta": {"date": "2030-01-02T23:00:00"}}]))
    same_day = compare.merge_spark(rows, META, str(path))
    assert "measured_separately" not in same_day[-1] and same_day[-1]["source"]
    assert compare.merge_spark(rows, META, str(tmp_path / "missing.json")) == rows
    path.write_text("{not json")
    assert compare.merge_spark(rows, META, str(path)) == rows


def test_write_results_json_md_png(compare, tmp_path):
    runs = _runs()
    rows = compare.merge_spark(compare.summarize(runs), META, str(tmp_path / "none.json"))
    paths = compare.write_results(META, runs, rows, str(tmp_path), "compare")
    data = json.loads(open(paths["json"]).read())
    assert data["meta"]["machine"]["cores"] == 2 and len(data["runs"]) == len(runs)
    assert {r["client"] for r in data["rows"]} == {"pyprod", "confluent-kafka", "java"}
    assert open(paths["md"]).read().startswith("# Producer comparison, 2030-01-02")
    with open(paths["png"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_replot_rebuilds_md_and_png_from_json(compare, tmp_path):
    runs = _runs()
    compare.write_results(META, runs, compare.summarize(runs), str(tmp_path), "compare",
                          with_chart=False)
    spark = tmp_path / "spark_sink.json"
    spark.write_text(json.dumps([{"client": "Spark format(kafka)", "workload": "spark",
                                  "records": 10, "records_per_s": 1.0}, {"meta": {}}]))
    assert compare.main(["--replot", "--out-dir", str(tmp_path), "--spark", str(spark)]) == 0
    md = (tmp_path / "compare.md").read_text()
    assert "Spark format(kafka) (measured separately, unknown date)" in md
    assert (tmp_path / "compare.png").exists()
    assert compare.main(["--replot", "--out-dir", str(tmp_path / "nowhere")]) == 1


def test_plan_counts_shares_and_skips(compare):
    args = compare.build_parser().parse_args(["--quick"])
    specs, skipped, n = compare.plan(args, list(compare.CLIENTS), ["100B-keyed", "1KiB"])
    assert n == 100_000
    thr = {(s["client"], s["workload"]): s["records"] for s in specs if not s["rate"]}
    assert thr[("pyprod", "100B-keyed")] == 100_000
    assert thr[("kafka-python", "100B-keyed")] == 10_000
    assert thr[("aiokafka", "1KiB")] == 5_000
    assert ("java", "100B-keyed") not in thr and "java / 100B-keyed" in skipped
    paced = [s for s in specs if s["rate"]]
    assert paced and all(s["rate"] == 50_000 and s["records"] == 50_000 for s in paced)
    assert all(s["linger_ms"] == 5 and s["acks"] == 1 for s in specs)
    assert compare._rotate([1, 2, 3], 4) == [2, 3, 1]
    specs, skipped, _ = compare.plan(args, list(compare.CLIENTS), ["100B-callbacks"])
    assert {s["client"] for s in specs} == {"pyprod", "confluent-kafka", "kafka-python",
                                            "aiokafka"} and "java / 100B-callbacks" in skipped
    assert all(s["callbacks"] and not s["rate"] for s in specs)  # no paced runs: same as 100B


@pytest.mark.parametrize("argv, message", [
    (["--clients", "pyprod,nope"], "unknown client 'nope'"),
    (["--workloads", "huge"], "unknown workload 'huge'"),
    (["--rounds", "0"], "--rounds must be positive"),
    (["--records", "-1"], "--records must be positive"),
    (["--clients", "java", "--no-java"], "no clients left to run"),
])
def test_compare_bad_arguments(compare, capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        compare.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_scaling_report_on_synthetic_rows(compare, scaling, tmp_path):
    runs = []
    for rnd in range(3):
        for shape, wall in (("1p-1t", 1.0), ("6p-1t", 0.8), ("24p-1t", 1.25),
                            ("6p-2t", 0.9), ("6p-4t", 1.0)):
            runs.append(_run("pyprod", shape, wall, 0.5, rnd))
    rows = compare.summarize(runs)
    verdict = scaling.memory_verdict(80.0, 32 * 2 ** 20)
    assert verdict == {"peak_rss_mb": 80.0, "bound_mb": 96.0, "held": True,
                       "buffer_memory_mb": 32.0}
    assert scaling.memory_verdict(120.0, 32 * 2 ** 20)["held"] is False
    memory = [{"client": "pyprod", "records": 5000, "wall_s": 1.0, "peak_rss_mb": 80.0,
               "rss_timeline": [(0.0, 10.0), (0.5, 70.0), (1.0, 80.0)], "verdict": verdict}]
    meta = dict(META, clients=["pyprod"])
    md = scaling.markdown(meta, memory, rows)
    assert "| pyprod | 5,000 | 5,000 | 80 | 96 | yes |" in md
    assert "24p-1t: 0.80x the records/s, 1.00x the CPU per record" in md
    assert "6p-4t: 0.80x the records/s" in md
    scaling.chart(meta, memory, rows, str(tmp_path / "scaling.png"))
    assert (tmp_path / "scaling.png").stat().st_size > 0
    specs = scaling.plan(1000, ["pyprod"])
    assert [(s["partitions"], s["threads"]) for s in specs] == \
        [(1, 1), (6, 1), (24, 1), (6, 2), (6, 4)]


def test_before_after_report_on_synthetic_runs(compare):
    before_after = _load("before_after")
    assert before_after.records_for_steady_state(100) * 120 * 0.05 >= 32 * 2 ** 20
    runs = []
    for rnd in range(3):  # after is 10% faster in every round, at the same CPU per record
        for tree, wall in (("before", 1.1), ("after", 1.0)):
            for shape in ("100B", "100B-4t"):
                runs.append({"tree": tree, "shape": shape, "round": rnd, "records": 1000,
                             "wall_s": wall * (1 + rnd), "process_cpu_s": 0.5})
    rows = before_after.summarize(runs)
    assert rows[("after", "100B")]["runs"] == 3
    assert before_after.paired(runs, "100B", lambda r: r["records"] / r["wall_s"]) == \
        pytest.approx(1.1)
    meta = {"before": "aaa", "after": "bbb", "broker": "mock", "date": META["date"],
            "machine": {"cpu_model": "cpu", "cores": 2}, "command": "python bench/x.py",
            "rounds": 3, "shapes": ["100B", "100B-4t"]}
    md = before_after.markdown(meta, rows, runs)
    assert "| 100B | 455 (303..909) | 500 (333..1,000) | 1.10x | 500.00 | 500.00 | 1.00x |" in md
    assert "after: one caller thread sends 1.00x the records/s of four." in md


def test_producer_peers_forwards_to_compare(monkeypatch, tmp_path):
    peers = _load("producer_peers")
    seen = {}
    monkeypatch.setattr(peers.compare, "main",
                        lambda argv, command=None: seen.update(argv=argv, command=command) or 0)
    out = tmp_path / "pp.json"
    assert peers.main(["--quick", "--batch-size", "1000000", "--out", str(out)]) == 0
    argv = seen["argv"]
    assert argv[argv.index("--workloads") + 1] == "100B" and "--no-latency" in argv
    assert argv[argv.index("--clients") + 1] == "pyprod,confluent,kafka-python"  # no Java
    assert argv[argv.index("--records") + 1] == "200000"
    assert argv[argv.index("--batch-size") + 1] == "1000000"
    assert argv[argv.index("--name") + 1] == "pp"
    assert argv[argv.index("--out-dir") + 1] == str(tmp_path)
    assert seen["command"].startswith("python bench/producer_peers.py --quick")


def test_tiny_real_run(compare, kafka, tmp_path, capsys):
    """One client, one workload, one round: the child runs, every record lands (counted
    with confluent-kafka's watermarks before the topic is deleted), the files are written."""
    rc = compare.main(["--bootstrap-servers", kafka.bootstrap_servers, "--clients", "pyprod",
                       "--workloads", "100B-keyed", "--records", "3000", "--no-steady", "--rounds", "1",
                       "--latency-seconds", "0.1", "--broker-warmup", "0", "--spark", "",
                       "--out-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "compare.json").read_text())
    (row,) = data["rows"]
    assert row["client"] == "pyprod" and row["workload"] == "100B-keyed"
    assert row["records"] == 3000 and row["records_per_s"] > 0 and row["p99_ms"] > 0
    assert row["peak_rss_mb"] > 0 and row["cpu_s_per_m"] > 0
    assert row["broker_cpu_s_per_m"] is None  # a broker given by address: its CPU is unknown
    assert [r["rate"] for r in data["runs"]] == [None, 50_000]
    assert data["runs"][1]["records"] == 5000 and data["runs"][1]["samples"] == 5000
    assert (tmp_path / "compare.png").exists() and (tmp_path / "compare.md").exists()
    assert "| 100B-keyed | pyprod | 3,000 |" in capsys.readouterr().out


@pytest.mark.parametrize("client", ["pyprod", "confluent-kafka", "kafka-python", "aiokafka"])
def test_callbacks_workload_counts_every_callback(compare, kafka, client):
    """The child of 100B-callbacks gives every record a callback and fails unless each ran."""
    spec = dict(compare.workload_spec("100B-callbacks"), client=client, records=2000, rate=None)
    res = compare.run_one(compare.Broker(kafka.bootstrap_servers), spec)
    assert res["records"] == 2000 and res["wall_s"] > 0 and res["workload"] == "100B-callbacks"


def test_broker_cpu_of_a_started_broker(compare, kafka):
    """compare.py reads the CPU of a broker it started from /proc (KafkaCluster.cpu_seconds)."""
    broker = compare.Broker()
    broker.cluster = kafka
    first = broker.cpu_s()
    assert first > 0
    assert broker.cpu_s() >= first


def test_broker_warm_up_runs_until_the_jit_settles(compare, monkeypatch):
    """Warm-up passes repeat while the broker's JIT compiler threads take >= 10% of its CPU."""
    ran = []
    monkeypatch.setattr(compare, "run_one", lambda broker, spec: ran.append(
        (spec["client"], spec["workload"], spec["value_size"], spec["records"])))

    class FakeBroker:  # C2 busy in pass 1 (50%) and 2 (10%), settled in pass 3 (2%)
        readings = iter([{"C2 CompilerThre": 0, "data-plane": 0},
                         {"C2 CompilerThre": 5, "data-plane": 5},
                         {"C2 CompilerThre": 6, "data-plane": 14},
                         {"C2 CompilerThre": 6.2, "data-plane": 24}])

        def thread_cpu_s(self):
            return next(self.readings, None)

    compare.warm_broker(FakeBroker(), ["pyprod", "kafka-python"], ["100B", "1KiB"], 1000)
    one_pass = [("pyprod", "warmup", 100, 1000), ("pyprod", "warmup", 1024, 250)]
    assert ran == one_pass * 3

    ran.clear()
    never = type("Remote", (), {"thread_cpu_s": lambda self: None})()
    compare.warm_broker(never, ["kafka-python"], ["100B"], 10)  # one pass, with confluent-kafka
    assert ran == [("confluent-kafka", "warmup", 100, 10)]


def test_gil_floor_tiny_run(tmp_path, capsys):
    gil_floor = _load("gil_floor")
    assert gil_floor.main(["--rounds", "1", "--calls", "20000", "--out-dir", str(tmp_path)]) == 0
    table = (tmp_path / "gil_floor.md").read_text()
    assert table.count("\n| ") == 4 and "| 4 |" in table  # header and 1, 2, 4 threads
    saved = json.loads((tmp_path / "gil_floor.json").read_text())
    for condition in ("idle", "busy"):
        floor = saved["conditions"][condition]
        assert floor["ratio"]["1"] == 1.0 and set(floor["rates"]) == {"1", "2", "4"}


def test_connections_tiny_real_run(kafka, tmp_path, monkeypatch, capsys):
    """bench/connections.py: 1 and 2 producer processes per client on one topic each; every
    record of both children lands (checked before the topic is deleted); one row per shape."""
    connections = _load("connections")
    monkeypatch.setattr(connections, "START_DELAY_S", 0.5)
    assert connections.main(["--bootstrap-servers", kafka.bootstrap_servers, "--records",
                             "2000", "--rounds", "1", "--out-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "connections.json").read_text())
    assert [(r["client"], r["producers"]) for r in saved["rows"]] == [
        ("pyprod", 1), ("pyprod", 2), ("confluent-kafka", 1), ("confluent-kafka", 2)]
    two = [r for r in saved["runs"] if r["producers"] == 2]
    assert all(len(r["each_wall_s"]) == 2 and r["records"] == 2000 for r in two)
    assert saved["rows"][0]["broker_cpu_s_per_m"] is None  # a broker given by address
    assert "| pyprod | 2 |" in capsys.readouterr().out


def test_transactional_table(compare, tmp_path):
    """bench/transactional.py: rows per broker, ratios within a broker, the skip note."""
    tx = _load("transactional")
    runs = []
    for kind in ("kafka", "mock"):
        for rnd in range(3):
            for client, wall in (("pyprod", 1.0), ("confluent-kafka", 2.0),
                                 ("kafka-python", 10.0)):
                if (kind, client) not in tx.SKIP:
                    runs.append(dict(_run(client, "transactional", wall / (1 + (kind == "mock")),
                                          wall / 4, rnd), broker=kind))
    rows = tx.rows_of(runs, ["kafka", "mock"])
    assert [(r["broker"], r["client"]) for r in rows] == [
        ("kafka", "pyprod"), ("kafka", "confluent-kafka"), ("kafka", "kafka-python"),
        ("mock", "pyprod"), ("mock", "confluent-kafka")]
    meta = dict(META, brokers=["kafka", "mock"], clients=list(tx.CLIENTS), steady_state=True)
    text = tx.markdown(meta, rows)
    assert "| Apache Kafka (1 node, tmpfs) | kafka-python | 100 (100..100) |" in text
    assert "| 10.00x | 10.00x |" in text and "| 2.00x | 2.00x |" in text
    assert "Not run: kafka-python on the librdkafka mock broker" in text
    assert "not steady state" in tx.markdown(dict(meta, steady_state=False), rows)


def test_threads_table_on_synthetic_runs(compare):
    """bench/threads.py: one row per thread count, ratios to one thread, the GIL as the runs
    saw it."""
    threads = _load("threads")
    assert threads.steady_records(4 * 2 ** 20) * 120 * 0.05 >= 4 * 2 ** 20
    runs = [{"threads": n, "records": 1000, "wall_s": wall * (1 + rnd), "cpu_s": 0.002 * n,
             "gil_enabled": False, "round": rnd}
            for rnd in range(3) for n, wall in ((1, 1.0), (2, 0.5), (4, 0.4))]
    ck = [dict(r, client="confluent-kafka", wall_s=r["wall_s"] * r["threads"]) for r in runs]
    rows = threads.summarize(runs + ck)
    assert [(r["client"], r["threads"], r["ratio_to_1"]) for r in rows] == [
        ("pyprod", 1, 1.0), ("pyprod", 2, 2.0), ("pyprod", 4, 2.5),
        ("confluent-kafka", 1, 1.0), ("confluent-kafka", 2, 1.0), ("confluent-kafka", 4, 0.625)]
    meta = dict(META, free_threaded_build=True, python_gil="0", buffer_memory=4 * 2 ** 20,
                steady_state=False)
    text = threads.markdown(meta, rows)
    assert "| pyprod | 4 | 1,250 (833..2,500) | 2.50x | 8.00 | 0.01 | off |" in text
    assert "| confluent-kafka | 4 | 312 (208..625) | 0.62x | 8.00 | 0.00 | off |" in text
    assert "GIL enabled in the runs (sys._is_gil_enabled()): off." in text
    both = threads.summarize(runs + [dict(r, gil_enabled=True, cpu_s=r["cpu_s"] / 2)
                                     for r in runs])
    assert [(r["threads"], r["gil_enabled"]) for r in both][:4] == [
        (1, [True]), (2, [True]), (4, [True]), (1, [False])]
    assert "pyprod, one thread: CPU per record with the GIL off is 2.00x that with it on " \
        "(records/s 1.00x)." in threads.markdown(meta, both)
    assert "free-threaded build, PYTHON_GIL=0" in text and "not steady state" in text


@pytest.mark.parametrize("argv,message", [(["--threads", "0"], "--threads"),
                                          (["--threads", "x"], "--threads"),
                                          (["--rounds", "0"], "must be positive"),
                                          (["--clients", "java"], "--clients"),
                                          (["--gil", "2"], "--gil")])
def test_threads_bad_arguments(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        _load("threads").main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_threads_tiny_run_on_the_mock(tmp_path, capsys):
    """bench/threads.py on librdkafka's mock cluster: 1 and 2 threads, every record landed
    (checked by end offsets), sys._is_gil_enabled() reported."""
    pytest.importorskip("confluent_kafka")
    threads = _load("threads")
    assert threads.main(["--threads", "1,2", "--rounds", "1", "--records", "3000",
                         "--out-dir", str(tmp_path), "--name", "t"]) == 0
    saved = json.loads((tmp_path / "t.json").read_text())
    assert [(r["client"], r["threads"], r["records"]) for r in saved["rows"]] == [
        ("pyprod", 1, 3000), ("pyprod", 2, 3000),
        ("confluent-kafka", 1, 3000), ("confluent-kafka", 2, 3000)]
    assert all(isinstance(r["gil_enabled"], bool) for r in saved["runs"])
    out = capsys.readouterr().out
    assert "| pyprod | 2 |" in out and "| confluent-kafka | 2 |" in out
    assert (tmp_path / "t.md").exists()


def test_loop_shapes_tiny_run(tmp_path):
    shapes = _load("loop_shapes")
    out = tmp_path / "shapes"
    assert shapes.main(["--rounds", "1", "--records", "3000", "--out", str(out)]) == 0
    table = (tmp_path / "shapes.md").read_text()
    for shape in shapes.SHAPES:
        assert f"| {shape} |" in table
    runs = json.loads((tmp_path / "shapes.json").read_text())["runs"]
    assert sorted(r["shape"] for r in runs) == sorted(shapes.SHAPES)


def test_latency_parts_on_synthetic_callbacks():
    """bench/latency_parts.py: records whose callbacks ran together form one response; its
    parts are medians over responses (the first fifth left out)."""
    lp = _load("latency_parts")
    done, sends = [], []
    for r in range(10):  # a response every 6 ms: 5 bursts of 2 records 1 ms apart, then 0.5 ms
        start = r * 0.006
        sends.append(start + 0.0042)
        done += [(start + b * 0.001 + i * 1e-5, start + 0.0045 + (b * 2 + i) * 1e-5)
                 for b in range(5) for i in range(2)]
    out = lp.parts(done, sends)
    assert out["responses"] == 8 and out["records"] == 10
    assert out["send span"] == pytest.approx(4.01) and out["oldest"] == pytest.approx(4.5)
    assert out["newest"] == pytest.approx(0.49) and out["callbacks"] == pytest.approx(0.09)
    assert out["drain->cb"] == pytest.approx(0.3) and out["linger"] == pytest.approx(4.2)
    assert "drain->cb" not in lp.parts(done)


def test_latency_parts_sender_steps():
    """bench/latency_parts.py: each request's steps on the Sender, from its polls (asked for,
    start, end) and its times (send, written, handler, handled); medians after the first
    fifth, in ms."""
    lp = _load("latency_parts")
    polls, requests = [], []
    for r in range(10):  # asked for 4 ms, slept 4.1; sent 0.2 ms later
        t = r * 0.01
        polls.append((0.004, t, t + 0.0041))
        requests.append([t + 0.0043, t + 0.0044, t + 0.0047, t + 0.0050])
        polls.append((None, t + 0.0044, t + 0.0047))  # woken by the response
    requests[-1] = requests[-1][:2]  # no response yet
    out = lp.sender_parts(polls, requests)
    assert out["wake late"] == pytest.approx(0.1) and out["wake->send"] == pytest.approx(0.2)
    assert out["write"] == pytest.approx(0.1) and out["response"] == pytest.approx(0.3)
    assert out["handler"] == pytest.approx(0.3)
    assert lp.sender_parts([], []) == {}


def test_latency_parts_tiny_run_on_the_mock(capsys):
    pytest.importorskip("confluent_kafka")
    assert _load("latency_parts").main(["--seconds", "0.2", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| drain->cb |" in out and "| p99 |" in out and "confluent-kafka" in out
    assert "| wake->send |" in out and "| handler |" in out


def test_byte_costs_parts_and_table():
    """bench/byte_costs.py: perf's dso/symbol pairs sorted into the parts of a record's CPU,
    the per-record difference of two runs, and the table beside the floors."""
    bc = _load("byte_costs")
    assert bc.part_of("[kernel.kallsyms]", "_copy_from_iter") == "kernel, copy to the socket"
    assert bc.part_of("[kernel.kallsyms]", "tcp_sendmsg_locked") == "kernel, the rest"
    assert bc.part_of("libc.so.6", "__memmove_avx512_unaligned_erms") == "copy into the batch"
    assert bc.part_of("crc.cpython-311-x86_64-linux-gnu.so", "0x525d") == "CRC32C"
    assert bc.part_of("librdkafka.so.1", "rd_crc32c_hw") == "CRC32C"
    assert bc.part_of("libpython3.11.so.1.0", "_PyEval_EvalFrameDefault") == "Python"
    assert bc.part_of("[vdso]", "__vdso_clock_gettime") == "clock"
    assert bc.part_of("send_path.cpython-311-x86_64-linux-gnu.so", "x") == \
        "the client's own code"
    small = {"parts": {("caller", "Python"): 1000, ("other", "CRC32C"): 500}}
    large = {"parts": {("caller", "Python"): 3000, ("other", "CRC32C"): 4500,
                       ("caller", "clock"): 100}}
    per = bc.per_record(small, large, 10)
    assert per == {"caller/Python": 200, "caller/clock": 10, "other/CRC32C": 400}
    meta = {"date": "2030-01-02", "command": "python bench/byte_costs.py",
            "machine": {"cpu_model": "Test CPU", "cores": 2, "python": "3.11"},
            "versions": {"pyprod": "0.1.0"}, "records": 10, "small": 1}
    text = bc.markdown(meta, {"pyprod": {"per_record": per, "records_per_s": 1e6,
                                         "cpu_s_per_m": 0.6}},
                       {"memcpy": 30.0, "crc32c": 50.0, "kernel_send": 70.0}, 1024)
    assert "| caller/Python | 200 |  |" in text and "| other/CRC32C | 400 | 55 |" in text
    assert "| **all** | **610** | |" in text
