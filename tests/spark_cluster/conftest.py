"""A Spark standalone cluster for tests/spark_cluster: one master, two workers of one core each
(two executor JVMs, each with its own Python workers), on 127.0.0.1, session-scoped. Jobs are
submitted with spark-submit (tests/spark_cluster/cluster_job.py) as users do. pyspark missing
is a failure, not a skip."""
import json
import os
import uuid

import pytest

from tests.harness.spark_cluster import SparkStandaloneCluster, base_env

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "cluster_job.py")
SITE = os.path.join(HERE, "site")  # sitecustomize: the executors log pyprod.spark to a file


@pytest.fixture(scope="session")
def spark_cluster():
    try:
        import pyspark  # noqa: F401
    except ImportError as e:  # pragma: no cover - the failure is the point
        pytest.fail("pyspark is not installed (pip install '.[test]'): %s" % (e,))
    cluster = SparkStandaloneCluster(workers=2, cores=1)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def submit(spark_cluster, tmp_path):
    """submit(bootstrap=..., topic=..., rows=..., ...) -> a SubmittedApp running
    cluster_job.py with those settings (see its doc); conf= adds Spark settings."""
    def run(conf=None, **cfg):
        cfg.setdefault("partitions", 4)
        cfg.setdefault("checkpoint", str(tmp_path / ("chk-" + uuid.uuid4().hex[:8])))
        cfg.setdefault("prefix", "cluster-" + uuid.uuid4().hex[:8])
        conf = dict({"spark.executorEnv.PYTHONPATH":
                     os.pathsep.join([SITE, base_env()["PYTHONPATH"]]),
                     "spark.executorEnv.PYPROD_TEST_LOG": "1"}, **(conf or {}))
        return spark_cluster.submit(JOB, json.dumps(cfg), conf=conf)
    return run
