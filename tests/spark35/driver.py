"""Spark 3.5 driver for tests/spark35, run by the test in the Spark 3.5 venv (see
tests/harness/spark35.py): local[2], pyprod.spark.publish(...) of a DataFrame with every
column of docs/spark.md's table, then a JSON report (versions, kcore, which path ran, the
count publish returned, register()'s error) to --out. It imports pyprod from PYTHONPATH.

    python driver.py --bootstrap HOST:PORT --topic T --rows N --partitions P \
        --mode arrow|fallback --out report.json
"""
import argparse
import json
import os
import sys

BASE_TS = 1_650_000_000_000  # ms; row i has BASE_TS + i unless its timestamp is null


class NoMapInArrow:
    """A DataFrame without mapInArrow, as on Spark < 3.3: publish() falls back to
    foreachPartition (it chooses by hasattr(df, "mapInArrow"); there is no switch)."""

    def __init__(self, df):
        self._df = df

    def __getattr__(self, name):
        if name == "mapInArrow":
            raise AttributeError(name)
        return getattr(self._df, name)


def frame(spark, rows, partitions):
    """Row i: key "k<i>" (null when i % 10 == 9), value b"v<i>", headers [("i", b"<i>"),
    ("src", b"spark35")], partition i % partitions when i % 3 == 0 (else null: the
    partitioner), timestamp BASE_TS + i ms (null when i % 7 == 6: now). 4 Spark partitions."""
    from pyspark.sql import functions as F
    i = F.col("id")
    return spark.range(0, rows, numPartitions=4).select(
        F.when(i % 10 != 9, F.concat(F.lit("k"), i.cast("string"))).alias("key"),
        F.concat(F.lit("v"), i.cast("string")).cast("binary").alias("value"),
        F.array(F.struct(F.lit("i").alias("key"), i.cast("string").cast("binary").alias("value")),
                F.struct(F.lit("src").alias("key"), F.lit(b"spark35").alias("value")))
        .alias("headers"),
        F.when(i % 3 == 0, (i % partitions).cast("int")).alias("partition"),
        F.when(i % 7 != 6, F.timestamp_millis(F.lit(BASE_TS) + i)).alias("timestamp"))


def main():
    ap = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--out"):
        ap.add_argument(name, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--mode", choices=("arrow", "fallback"), required=True)
    args = ap.parse_args()

    import importlib

    import kcore
    import numpy
    import pandas
    import pyarrow
    import pyspark
    from pyspark.sql import SparkSession

    import pyprod.spark
    publish_mod = importlib.import_module("pyprod.spark.publish")

    report = {"python": sys.version.split()[0], "pyspark": pyspark.__version__,
              "pyarrow": pyarrow.__version__, "pandas": pandas.__version__,
              "numpy": numpy.__version__, "kcore": kcore.IMPLEMENTATION,
              "kcore_file": kcore.__file__, "pyprod_file": pyprod.spark.__file__,
              "tz": os.environ.get("TZ")}
    spark = (SparkSession.builder.master("local[2]").appName("pyprod-spark35")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "512m")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        report["spark"] = spark.version
        try:
            pyprod.spark.register(spark)
            report["register_error"] = None
        except RuntimeError as e:
            report["register_error"] = str(e)

        # kcore as the Python workers load it
        report["worker_kcore"] = sorted(set(spark.sparkContext.parallelize(range(2), 2).map(
            lambda _: __import__("kcore").IMPLEMENTATION).collect()))

        df = frame(spark, args.rows, args.partitions)
        report["has_mapInArrow"] = hasattr(df, "mapInArrow")
        paths = []
        for name in ("publish_arrow", "publish_rows"):
            real = getattr(publish_mod, name)

            def spy(*a, _real=real, _name=name, **kw):
                paths.append(_name)
                return _real(*a, **kw)
            setattr(publish_mod, name, spy)
        target = df if args.mode == "arrow" else NoMapInArrow(df)
        report["published"] = pyprod.spark.publish(target, args.topic,
                                                   bootstrap_servers=args.bootstrap,
                                                   linger_ms=5, acks="all")
        report["paths"] = paths
    finally:
        spark.stop()
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
