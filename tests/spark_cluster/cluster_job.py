"""A PySpark application for the standalone-cluster tests, run with spark-submit:

    spark-submit --master spark://... cluster_job.py '{"bootstrap": ..., "topic": ..., ...}'

One JSON argument: bootstrap, topic, rows, partitions, writes (batch writes of the same rows,
one after the other), exactly_once, stream (a streaming write of ``files`` JSON files of the
rows, one micro-batch each, trigger availableNow), checkpoint, slow_ms (a pandas UDF sleeps
this long per Arrow batch of 500 rows, so a test can act mid-write), started (a file created
when the first write starts). Prints one JSON line: the application id and what it wrote.
Values are the row ids as strings, keys ``k<id % 97>``."""
import json
import os
import sys
import time

import pyprod.spark


def source(spark, cfg):
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    slow_s = cfg.get("slow_ms", 0) / 1000.0

    @pandas_udf("string")
    def value(ids):
        if slow_s:
            time.sleep(slow_s)
        return ids.astype(str)

    if cfg.get("stream"):
        src = os.path.join(cfg["checkpoint"] + "-input")
        os.makedirs(src, exist_ok=True)
        per = cfg["rows"] // cfg["files"]
        for f in range(cfg["files"]):
            with open(os.path.join(src, "part-%04d.json" % f), "w") as out:
                out.writelines('{"id": %d}\n' % i for i in range(f * per, (f + 1) * per))
        df = spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(src) \
            .repartition(cfg["partitions"])
    else:
        df = spark.range(0, cfg["rows"], 1, cfg["partitions"])
    return df.select(F.concat(F.lit("k"), (F.col("id") % 97).cast("string")).alias("key"),
                     value("id").alias("value"))


def options(writer, cfg):
    writer = writer.format("pyprod").option("kafka.bootstrap.servers", cfg["bootstrap"]) \
        .option("topic", cfg["topic"]).option("kafka.linger.ms", "5")
    if cfg.get("exactly_once"):
        writer = writer.option("exactlyOnce", "true") \
            .option("transactionalIdPrefix", cfg.get("prefix", "cluster-test"))
    return writer


def main():
    cfg = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("pyprod-cluster-test").getOrCreate()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    pyprod.spark.register(spark)
    app_id = spark.sparkContext.applicationId
    print(json.dumps({"app_id": app_id, "event": "started"}), flush=True)
    if cfg.get("started"):
        open(cfg["started"], "w").close()
    df = source(spark, cfg)
    if cfg.get("stream"):
        query = options(df.writeStream, cfg).option("checkpointLocation", cfg["checkpoint"]) \
            .trigger(availableNow=True).start()
        query.awaitTermination()
        batches = len([p for p in query.recentProgress if p["numInputRows"]])
    else:
        for _ in range(cfg.get("writes", 1)):
            options(df.write.mode("append"), cfg).save()
        batches = None
    spark.stop()
    print(json.dumps({"app_id": app_id, "rows": cfg["rows"], "batches": batches}), flush=True)


if __name__ == "__main__":
    main()
