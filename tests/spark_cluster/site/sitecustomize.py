"""Put on the executors' PYTHONPATH by the standalone-cluster tests: with PYPROD_TEST_LOG=1,
the "pyprod.spark" logger writes INFO to pyprod-python.log in the process's working directory
(an executor's work directory, beside its stderr), as a user's logging setup would; PySpark's
daemon imports this before it forks the Python workers, which share the file."""
import logging
import os

if os.environ.get("PYPROD_TEST_LOG") == "1":
    _handler = logging.FileHandler(os.path.join(os.getcwd(), "pyprod-python.log"))
    _handler.setFormatter(logging.Formatter("%(process)d %(name)s %(message)s"))
    _log = logging.getLogger("pyprod.spark")
    _log.addHandler(_handler)
    _log.setLevel(logging.INFO)
