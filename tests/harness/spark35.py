"""A venv with Spark 3.5 for tests/spark35 (pyprod.spark.publish on a real Spark 3).

The venv holds the pinned REQUIREMENTS only. It lives outside the source tree, in
``$PYPROD_SPARK35_CACHE`` or ``~/.cache/pyprod``, as ``venv-spark35-<hash>``: the hash covers
the requirements and the interpreter, so a change of either builds a new venv (and the old
ones are removed once no test run uses them). An exclusive file lock makes concurrent runs
build it once; a shared lock is held while a run uses it.

pyprod is not installed into it: the driver and the Python workers import this checkout's
src/ through PYTHONPATH, with the kcore modules compiled in place by scripts/setup.sh for the
same interpreter (the venv is made from it). A wheel built from src/ would need a new venv
and a kcore compile (69 s here) after every edit of src/.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

# pyspark 3.5 wants numpy < 2 (its setup.py extras); pyarrow 26 refuses numpy < 2 at import,
# so 25.x is the newest pyarrow that fits; pandas < 3; cramjam is pyprod's one dependency.
REQUIREMENTS = (
    "pyspark==3.5.9",
    "py4j==0.10.9.9",
    "pyarrow==25.0.1",
    "pandas==2.3.3",
    "numpy==1.26.4",
    "cramjam==2.14.0",
)
SPARK_JAVA = (8, 11, 17)  # the Java versions Spark 3.5 supports
STAMP = ".pyprod-spark35-stamp"
PIP_TIMEOUT = 1800  # s; only against hangs
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Spark35Unavailable(RuntimeError):
    """The venv could not be built, or no Java fits Spark 3.5."""


@dataclass
class Spark35Venv:
    path: str
    python: str
    built_s: float | None  # seconds this run spent building it; None: reused
    info: dict             # the stamp: requirements, versions, first build time
    java_home: str

    def env(self, **extra) -> dict:
        """Environment for a Spark 3.5 driver: this venv's python for driver and workers,
        its pyspark as SPARK_HOME, a Java Spark 3.5 supports, this checkout's src/ first on
        PYTHONPATH, 127.0.0.1 only. Nothing of the calling venv's Spark setup leaks in."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYSPARK", "SPARK_", "PYTHON", "VIRTUAL_ENV", "JAVA_HOME"))}
        bindir = os.path.dirname(self.python)
        env.update(
            VIRTUAL_ENV=self.path,
            PATH=os.pathsep.join([bindir, env.get("PATH", "")]),
            PYTHONPATH=os.path.join(ROOT, "src"),
            PYSPARK_PYTHON=self.python,
            PYSPARK_DRIVER_PYTHON=self.python,
            SPARK_HOME=self.info["spark_home"],
            SPARK_LOCAL_IP="127.0.0.1",
            JAVA_HOME=self.java_home,
        )
        env.update(extra)
        return env


def venv_key() -> str:
    h = hashlib.sha256("\n".join((sys.version, sys.base_prefix) + REQUIREMENTS).encode())
    return h.hexdigest()[:16]


def cache_root() -> str:
    return os.path.expanduser(os.environ.get("PYPROD_SPARK35_CACHE") or "~/.cache/pyprod")


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 else major  # "1.8.0" is Java 8


def java_home() -> str:
    """JAVA_HOME of a Java Spark 3.5 supports: $JAVA_HOME, the `java` on PATH, then
    /usr/lib/jvm/*; Spark35Unavailable naming what was found otherwise."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(os.path.join(os.environ["JAVA_HOME"], "bin", "java"))
    if shutil.which("java"):
        candidates.append(os.path.realpath(shutil.which("java")))
    candidates += sorted(glob.glob("/usr/lib/jvm/*/bin/java"))
    seen = {}
    for java in dict.fromkeys(candidates):
        major = _java_major(java)
        seen[java] = major
        if major in SPARK_JAVA:
            return os.path.dirname(os.path.dirname(java))
    raise Spark35Unavailable(f"Spark 3.5 needs Java {SPARK_JAVA}; found {seen or 'no java'} "
                             "(apt-get install openjdk-17-jdk-headless)")


def _run(cmd, what, env=None):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=env)
    except subprocess.TimeoutExpired as e:
        raise Spark35Unavailable(f"{what}: no answer in {PIP_TIMEOUT} s ({e.cmd})") from e
    if p.returncode:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-30:])
        raise Spark35Unavailable(f"{what} failed ({p.returncode}): {' '.join(cmd)}\n{tail}")
    return p.stdout


_PROBE = """import json, os, sys, numpy, pandas, pyarrow, py4j, pyspark
print(json.dumps({"python": sys.version.split()[0], "pyspark": pyspark.__version__,
    "pyarrow": pyarrow.__version__, "pandas": pandas.__version__, "numpy": numpy.__version__,
    "spark_home": os.path.dirname(pyspark.__file__)}))"""


def _build(path: str) -> dict:
    """python -m venv + pip install REQUIREMENTS; the stamp's contents."""
    shutil.rmtree(path, ignore_errors=True)  # a build that died half-way
    start = time.monotonic()
    # made from this interpreter: the checkout's compiled kcore fits the venv's python
    _run([sys.executable, "-m", "venv", path], "creating the Spark 3.5 venv")
    python = os.path.join(path, "bin", "python")
    _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
          "--no-input", *REQUIREMENTS], "installing Spark 3.5 (pip)")
    info = json.loads(_run([python, "-c", _PROBE], "importing Spark 3.5's packages",
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}))
    info.update(key=venv_key(), requirements=list(REQUIREMENTS),
                build_s=round(time.monotonic() - start, 1))
    return info


def _prune(root: str, keep: str) -> None:
    """Remove the other venv-spark35-* venvs that no run holds (old requirement sets)."""
    for lock in glob.glob(os.path.join(root, "venv-spark35-*.lock")):
        path = lock[:-len(".lock")]
        if path == keep:
            continue
        with open(lock, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            shutil.rmtree(path, ignore_errors=True)  # the lock file stays (a few bytes)


def ensure_venv() -> tuple[Spark35Venv, object]:
    """The venv (built if needed) and the lock file object, held shared until closed."""
    java = java_home()  # no Java that fits: fail before building anything
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "venv-spark35-" + venv_key())
    stamp = os.path.join(path, STAMP)
    lockf = open(path + ".lock", "a+")
    try:
        fcntl.flock(lockf, fcntl.LOCK_EX)  # concurrent runs build it once
        built_s = None
        try:
            with open(stamp) as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = _build(path)
            built_s = info["build_s"]
            with open(stamp, "w") as f:
                json.dump(info, f, indent=1)
        fcntl.flock(lockf, fcntl.LOCK_SH)  # in use: no one prunes it
        _prune(root, keep=path)
    except BaseException:
        lockf.close()
        raise
    venv = Spark35Venv(path, os.path.join(path, "bin", "python"), built_s, info, java)
    return venv, lockf
