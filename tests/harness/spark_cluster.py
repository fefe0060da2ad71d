"""A Spark standalone cluster on 127.0.0.1, started from pyspark's own jars and scripts
(``bin/spark-class`` with the Master and Worker classes): one master, ``workers`` workers, each
launching its own executor JVMs, each executor its own Python workers. Jobs go in as users
send them: ``spark-submit --master spark://...`` (client mode: the driver is the
spark-submit process).

    with SparkStandaloneCluster(workers=2) as cluster:
        run = cluster.submit("job.py", "--rows", "1000")
        result = run.wait()                # the JSON line the script printed last
        cluster.executor_pids(run.app_id)  # live executor JVMs of that application

Every process gets PYTHONPATH with this checkout (``src`` and the repository root), so the
executors' Python workers import the pyprod under test and the driver scripts can import
``tests.harness``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pyprod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.dirname(os.path.dirname(os.path.abspath(pyprod.__file__)))
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_APP_ID = re.compile(r"app-\d{14}-\d{4}")


def spark_home():
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(extra=None):
    """The environment of every Spark process: pyspark's home, loopback only, this checkout
    on PYTHONPATH, this interpreter for the Python workers."""
    env = dict(os.environ)
    paths = [SRC, ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYARROW_IGNORE_TIMEZONE="1", SPARK_DAEMON_MEMORY="256m")
    env.update(extra or {})
    return env


class SubmittedApp:
    """One spark-submit run: its process, output file and application id."""

    def __init__(self, proc, out_path, log_path):
        self.proc, self.out_path, self.log_path = proc, out_path, log_path
        self._app_id = None

    @property
    def app_id(self):
        """The application id the driver logged (None until the driver registered)."""
        if self._app_id is None:
            m = _APP_ID.search(self.log())
            self._app_id = m.group(0) if m else None
        return self._app_id

    def wait_app_id(self, timeout=120):
        deadline = time.monotonic() + timeout
        while self.app_id is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the driver never registered with the master:\n"
                                     + self.log()[-4000:])
            time.sleep(0.2)
        return self.app_id

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stdout(self):
        """The driver's stdout: its JSON lines, and Python's stderr (spark-submit's PythonRunner
        sends it there)."""
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def _failure(self):
        """The driver's stdout (Python's stderr), the log's tracebacks and ERROR lines (Spark's
        INFO lines bury them), then the log's tail."""
        text = self.log()
        picked = [ln for ln in text.splitlines()
                  if " ERROR " in ln or ln.startswith(("Traceback", "  File ", "    "))
                  or (ln and not ln[:2].isdigit() and ln[0].isalpha() and ":" in ln[:80])]
        out = "\n".join(ln for ln in self.stdout().splitlines() if not ln.startswith("{"))
        return ("--- driver stdout (Python's stderr) ---\n" + out[-6000:]
                + "\n--- log: tracebacks and ERROR lines ---\n" + "\n".join(picked)[-4000:]
                + "\n--- log tail ---\n" + text[-3000:])

    def wait(self, timeout=600):
        """The driver's last JSON line on stdout; fails with the driver's log tail."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("the driver did not end within %d s:\n%s"
                                 % (timeout, self.log()[-6000:])) from None
        with open(self.out_path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
        if code != 0 or not lines:
            raise AssertionError("the driver failed (exit %s):\n%s" % (code, self._failure()))
        return json.loads(lines[-1])


class SparkStandaloneCluster:
    def __init__(self, workers=2, cores=1, memory="1g", executor_memory="512m"):
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.executor_memory = executor_memory
        self.dir = tempfile.mkdtemp(prefix="pyprod-spark-cluster-")
        self.procs = []
        self.master_url = self.webui = None

    # -- life cycle --------------------------------------------------------------------------
    def _spawn(self, name, *args, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "wb")
        proc = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env or self.env(),
                                cwd=self.dir, start_new_session=True)
        log.close()
        self.procs.append((name, proc))
        return proc

    def env(self, extra=None):
        return base_env(dict(
            SPARK_LOG_DIR=os.path.join(self.dir, "logs"),
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false", **(extra or {})))

    def start(self, timeout=180):
        port, ui = free_port(), free_port()
        self.master_url = "spark://127.0.0.1:%d" % port
        self.webui = "http://127.0.0.1:%d" % ui
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui))
        self._wait(lambda s: s.get("status") == "ALIVE", timeout, "the master")
        for i in range(self.n_workers):
            self.start_worker(i)
        self._wait(lambda s: s.get("aliveworkers") == self.n_workers, timeout,
                   "%d workers" % self.n_workers)
        return self

    def start_worker(self, i):
        work = os.path.join(self.dir, "worker%d" % i)
        os.makedirs(work, exist_ok=True)
        return self._spawn("worker%d" % i, "org.apache.spark.deploy.worker.Worker",
                           self.master_url, "--host", "127.0.0.1", "--cores", str(self.cores),
                           "--memory", self.memory, "--webui-port", "0", "--work-dir", work)

    def state(self):
        try:
            with urllib.request.urlopen(self.webui + "/json/", timeout=5) as r:
                return json.loads(r.read().decode())
        except OSError:
            return {}

    def _wait(self, ok, timeout, what):
        deadline = time.monotonic() + timeout
        while not ok(self.state()):
            dead = [n for n, p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise AssertionError("Spark standalone: %s not up (%s):\n%s" % (
                    what, "exited: %s" % dead if dead else "timeout", self.logs_tail()))
            time.sleep(0.3)

    def stop(self):
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for pid in self.executor_pids():
            _kill(pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- jobs ------------------------------------------------------------------------------
    def submit(self, script, *args, conf=None, env=None):
        """spark-submit ``script`` to the cluster; a SubmittedApp."""
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                    "spark.driver.memory": "512m", "spark.executor.memory": self.executor_memory,
                    "spark.ui.enabled": "false", "spark.python.worker.reuse": "true",
                    "spark.executorEnv.PYTHONPATH": base_env()["PYTHONPATH"],
                    "spark.executorEnv.PYARROW_IGNORE_TIMEZONE": "1"}
        settings.update(conf or {})
        stamp = "%d-%d" % (os.getpid(), time.monotonic_ns())
        out_path = os.path.join(self.dir, "driver-%s.out" % stamp)
        log_path = os.path.join(self.dir, "driver-%s.log" % stamp)
        cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", self.master_url]
        for k, v in settings.items():
            cmd += ["--conf", "%s=%s" % (k, v)]
        cmd += [script, *args]
        with open(out_path, "wb") as out, open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdout=out, stderr=log, env=self.env(env),
                                    cwd=self.dir, start_new_session=True)
        return SubmittedApp(proc, out_path, log_path)

    # -- executors -------------------------------------------------------------------------
    def executor_pids(self, app_id=None):
        """{pid: (app id, executor id)} of the live executor JVMs (of ``app_id``)."""
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if EXECUTOR_CLASS not in argv or not _in_dir(int(pid), self.dir):
                continue
            app = _arg(argv, "--app-id")
            if app_id is None or app == app_id:
                out[int(pid)] = (app, _arg(argv, "--executor-id"))
        return out

    def kill_executor(self, pid):
        """SIGKILL an executor JVM and the Python processes under it."""
        children = _descendants(pid)
        _kill(pid, signal.SIGKILL)
        for c in children:
            _kill(c, signal.SIGKILL)

    def executor_logs(self, app_id, name="stderr"):
        """{executor id: its log ``name`` (a file in its work directory)} for every executor
        the workers ran for ``app_id``."""
        out = {}
        for i in range(self.n_workers):
            app_dir = os.path.join(self.dir, "worker%d" % i, app_id)
            for ex in sorted(os.listdir(app_dir)) if os.path.isdir(app_dir) else ():
                path = os.path.join(app_dir, ex, name)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        out[ex] = f.read()
        return out

    def logs_tail(self, n=3000):
        parts = []
        for name, _ in self.procs:
            path = os.path.join(self.dir, name + ".log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    parts.append("--- %s ---\n%s" % (name, f.read()[-n:]))
        return "\n".join(parts)


def _arg(argv, name):
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def _in_dir(pid, directory):
    try:
        return os.readlink("/proc/%d/cwd" % pid).startswith(directory)
    except OSError:
        return False


def _descendants(pid):
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
