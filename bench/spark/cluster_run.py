"""The driver of bench/spark_sink.py --cluster, run by spark-submit in client mode:

    spark-submit --master spark://... bench/spark/cluster_run.py '{"bootstrap": ..., ...}'

One JSON argument (bench/_spark_cluster_sink.run_cluster writes it): bootstrap, rows, rounds,
warmup_rows, clients, kafka_options, parts, probe, cluster_dir, workers, broker_pid,
daemon_pids. Runs spark_sink's warm-up and timed rounds, each write measured by a
ClusterMeter, and prints {"app_id": ..., "runs": [...]} as its last line."""
import json
import os
import sys
import types

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)

import spark_sink as sink  # noqa: E402
from _spark_cluster_sink import ClusterMeter, ClusterView, CountingBroker  # noqa: E402


def driver_root():
    """spark-submit's JVM (this Python's parent), else this process."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            if b"org.apache.spark.deploy.SparkSubmit" in f.read():
                return os.getppid()
    except OSError:
        pass
    return os.getpid()


def main():
    cfg = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    import pyprod.spark
    spark = SparkSession.builder.appName("pyprod-spark-sink-cluster").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pyprod.spark.register(spark)
    app_id = spark.sparkContext.applicationId
    view = ClusterView(cfg["cluster_dir"], cfg["workers"])
    root = driver_root()

    def meter():
        return ClusterMeter(view, app_id, cfg["workers"], root, cfg["broker_pid"],
                            cfg["daemon_pids"])

    args = types.SimpleNamespace(rows=cfg["rows"], rounds=cfg["rounds"],
                                 warmup_rows=cfg["warmup_rows"])
    try:
        runs = sink.timed_rounds(spark, cfg["clients"], args, CountingBroker(cfg["bootstrap"]),
                                 cfg["kafka_options"], meter, cfg["parts"], probe=cfg["probe"])
    finally:
        spark.stop()
    print(json.dumps({"app_id": app_id, "driver_root_is_jvm": root != os.getpid(),
                      "runs": runs}), flush=True)


if __name__ == "__main__":
    main()
