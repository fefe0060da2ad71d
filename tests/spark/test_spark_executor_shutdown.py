"""pyprod.spark.executor_shutdown: in a process that looks like a PySpark worker, the cache's
producers are closed when the executor goes away, by either way a worker leaves: the daemon's
SIGHUP, or pyspark.worker.main ending with SystemExit(-1) (its socket closed: pyspark turns
the EOFError into that). Fake producers; the
standalone-cluster tests see the same on real executors."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import io, logging, os, signal, sys, time
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as PySpark's worker sets it (nohup: ignored)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    from pyprod.spark.producer_cache import ProducerCache

    class Fake:
        def __init__(self, config):
            self.config = config
        def close(self, timeout=None):
            print("closed", self.config["n"], flush=True)

    cache = ProducerCache(factory=Fake, evictor=False)
    for n in (1, 1, 2):
        cache.release(cache.acquire({"n": n}))
    print("ready", flush=True)
    if sys.argv[1] == "eof":
        import pyspark.worker
        pyspark.worker.main(io.BytesIO(b""), io.BytesIO())
    time.sleep(60)
""")


def run(how, env_secret=True):
    env = {"PYTHON_WORKER_FACTORY_SECRET": "s", "SPARK_REUSE_WORKER": "1"} if env_secret \
        else {}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **env))
    if how == "hup":
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.replace("ready\n", ""), err


@pytest.mark.parametrize("how", ["hup", "eof"])
def test_a_workers_producers_are_closed_when_its_executor_goes(how):
    code, out, err = run(how)
    assert sorted(out.split("\n")[:2]) == ["closed 1", "closed 2"], (out, err)
    assert "executor shutdown (%s): closed 2 producers (created 2, acquired 3, closed 2" % (
        "SIGHUP" if how == "hup" else "the worker leaves") in out
    # and the worker still leaves as before: killed by the SIGHUP, or SystemExit(-1)
    assert code == (-signal.SIGHUP if how == "hup" else 255), (code, err)


def test_outside_a_pyspark_worker_nothing_is_installed():
    code, out, _ = run("hup", env_secret=False)
    assert code == -signal.SIGHUP and out == ""
