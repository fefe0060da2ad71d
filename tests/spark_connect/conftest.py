"""tests/spark_connect: format("pyprod") and pyprod.spark.publish through a Spark Connect
server (tests/harness/spark_connect.py) started from pyspark's own jars, against real Kafka.

Each test runs with pyspark's Connect mode on (pyspark.sql.functions build Connect columns),
and off again after it, for the classic session of tests/spark in the same process."""
import pytest

from tests.harness.spark_connect import (  # noqa: F401  (the fixtures)
    connect_mode, spark_connect, spark_connect_server)


@pytest.fixture(autouse=True)
def _connect_mode():
    with connect_mode():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or rep.when not in ("setup", "call"):
        return
    server = getattr(item, "funcargs", {}).get("spark_connect_server")
    if server is not None:
        rep.sections.append(("spark connect server log tail", server.log_tail(80)))
