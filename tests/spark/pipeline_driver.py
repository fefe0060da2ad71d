"""The pipeline users build, as a Spark driver of its own (run by
tests/spark/test_spark_kafka_to_kafka.py as a subprocess): Spark's Kafka source -> a transform
-> format("pyprod") exactly once, from a checkpoint, trigger availableNow (it stops when the
input present at its start is consumed).

    python tests/spark/pipeline_driver.py --bootstrap H:P --input IN --output OUT \\
        --checkpoint DIR --prefix P --max-offsets 1000 [--die task:3|decision:8|half:12]

The transform: key kept, value upper-cased, partition kept (the output partition is the input
one), a header "source" = b"<input partition>:<input offset>".

--die crashes the whole driver (its process group: this Python, the JVM, the Python workers,
as SIGKILL) at a point of micro-batch N, through pipeline_hooks/sitecustomize.py, which every
Python worker of this application imports at start-up. The last line on stdout is a JSON
summary of a run that ends by itself."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOOKS = os.path.join(HERE, "pipeline_hooks")
sys.path.insert(0, ROOT)

from tests.harness.spark_cluster import base_env  # noqa: E402
from tests.harness.spark_kafka_jars import spark_kafka_jars  # noqa: E402


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prefix", required=True, help="transactionalIdPrefix")
    ap.add_argument("--max-offsets", type=int, default=1000, help="maxOffsetsPerTrigger")
    ap.add_argument("--die", help="task:N, decision:N or half:N (see pipeline_hooks)")
    ap.add_argument("--mark", help="file the crash hook appends where it died to")
    return ap.parse_args(argv)


def environment(args):
    """os.environ for the JVM and, through it, the Python workers."""
    if os.getpgrp() != os.getpid():
        os.setpgrp()  # the crash takes down this process group
    extra = {"PYPROD_PIPELINE_PGID": str(os.getpgrp())}
    if args.die:
        extra.update(PYPROD_PIPELINE_DIE=args.die, PYPROD_PIPELINE_MARK=args.mark)
    env = base_env(extra)
    env["PYTHONPATH"] = os.pathsep.join([HOOKS, env["PYTHONPATH"]])
    os.environ.clear()
    os.environ.update(env)


def session():
    from pyspark.sql import SparkSession

    import pyprod.spark
    spark = (SparkSession.builder.master("local[2,2]").appName("pyprod-kafka-to-kafka")
             .config("spark.jars", ",".join(spark_kafka_jars()))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "640m")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pyprod.spark.register(spark)
    return spark


def pipeline(spark, args):
    """The code a user writes (readStream kafka -> transform -> writeStream pyprod)."""
    from pyspark.sql import functions as F

    source = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.max_offsets)
              .load())
    origin = F.concat_ws(":", F.col("partition").cast("string"), F.col("offset").cast("string"))
    out = source.select(
        F.col("key"),
        F.upper(F.col("value").cast("string")).alias("value"),
        F.col("partition"),
        F.array(F.struct(F.lit("source").alias("key"),
                         origin.cast("binary").alias("value"))).alias("headers"))
    return (out.writeStream.format("pyprod").queryName("kafka_to_kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.output)
            .option("exactlyOnce", "true")
            .option("transactionalIdPrefix", args.prefix)
            .option("kafka.linger.ms", "5")
            .option("checkpointLocation", args.checkpoint)
            .trigger(availableNow=True)
            .start())


def main(argv=None):
    args = parse(argv)
    environment(args)
    spark = session()
    query = pipeline(spark, args)
    query.awaitTermination()
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    error = query.exception()
    spark.stop()
    print(json.dumps({"batches": batches, "rows": rows,
                      "error": None if error is None else str(error)}), flush=True)
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
