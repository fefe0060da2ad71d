"""One local Spark session for all of tests/spark (small settings, 127.0.0.1 only). It runs
local[2,2]: two threads, and a failed task is retried once (the exactly-once tests need a
retry; plain local[2] fails the job at the first task failure).

pyspark missing is a failure, not a skip. Python workers import pyprod from this checkout
(PYTHONPATH is set before the JVM starts, and workers inherit it): the same pyprod as the
tests'."""
import os
import sys

import pytest


try:
    import pyspark  # noqa: F401
    PYSPARK_ERROR = None
except ImportError as e:  # pragma: no cover - the failure is the point
    PYSPARK_ERROR = e


def _worker_env():
    import pyprod
    here = os.path.dirname(os.path.dirname(os.path.abspath(pyprod.__file__)))
    paths = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if PYSPARK_ERROR is not None:
        pytest.fail("pyspark is not installed (pip install '.[test]'): %s" % (PYSPARK_ERROR,))
    _worker_env()
    from pyspark.sql import SparkSession

    import pyprod.spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (SparkSession.builder.master("local[2,2]").appName("pyprod-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.memory", "768m")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.sql.streaming.schemaInference", "false")
               .config("spark.sql.pyspark.worker.logging.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.python.worker.faulthandler.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pyprod.spark.register(session)
    yield session
    session.stop()


def _activate(session):
    """Make ``session`` the JVM's active session on the calling thread's JVM thread: py4j may
    move a Python thread to a new JVM thread (it did when the broker fixture started), and
    Spark looks Python data sources up in the active session only."""
    session._jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)
    return session


@pytest.fixture
def activate():
    """activate(session): call it right before save()/start() (fixtures set up after the
    session, like the broker, can move the test to a new JVM thread)."""
    return _activate


@pytest.fixture(autouse=True)
def _active_spark_session(request):
    if "spark" in request.fixturenames:
        _activate(request.getfixturevalue("spark"))


@pytest.fixture
def worker_logs(spark):
    """worker_logs(needle) -> messages of the "pyprod.spark.commit" logger in the Python
    workers' logs (commit/abort summaries) containing ``needle``."""
    def read(needle):
        rows = spark.tvf.python_worker_logs().where("logger = 'pyprod.spark.commit'") \
            .select("msg").collect()
        return [r.msg for r in rows if needle in r.msg]
    return read
