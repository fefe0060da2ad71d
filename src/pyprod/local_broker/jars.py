"""The Kafka jars (resolved once with Maven through ``pom.xml`` beside this file, cached outside
the source tree: ``$PYPROD_KAFKA_CACHE`` or ``~/.cache/pyprod/kafka-<version>``) and the java
executable that runs them."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import logging
import os
import shutil
import subprocess
import time

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaLibsUnavailable", "ensure_kafka_libs",
           "java_executable", "maven_libs", "run_maven", "version_tuple"]

DEFAULT_KAFKA_VERSION = "4.3.1"
STAMP = "pyprod-libs.stamp"

log = logging.getLogger("pyprod.local_broker")


class KafkaLibsUnavailable(RuntimeError):
    """Java, Maven or Maven Central is missing, so no real broker can run here."""


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    found = home and shutil.which("java", path=os.path.join(home, "bin"))  # java.exe on Windows
    found = found or shutil.which("java")
    if not found:
        raise KafkaLibsUnavailable("no `java` on PATH (Java 17+ is needed for Kafka 4.x)")
    return found


def version_tuple(version: str) -> tuple:
    """``"3.9.2"`` -> ``(3, 9, 2)``; a suffix such as ``-rc1`` is dropped."""
    parts = []
    for p in version.split("-")[0].split("."):
        if not p.isdigit():
            break
        parts.append(int(p))
    if not parts:
        raise ValueError(f"not a Kafka version: {version!r}")
    return tuple(parts)


def _maven_props(version: str) -> list[str]:
    """pom.xml's properties for ``version``: before 4.0 the ``legacy`` profile (no kafka-server
    or kafka-tools jars, log4j 1), before 2.4 the Scala 2.12 broker jar (no 2.13 one), and the
    ZooKeeper client that works on Java 17 for 2.0 to 2.3."""
    v = version_tuple(version)
    props = [f"-Dkafka.version={version}"]
    if v < (4,):
        props.append("-Dkafka.legacy=true")
    if v < (2, 4):
        props.append("-Dscala.binary=2.12")
    if (2,) <= v < (2, 4):
        # their ZooKeeper 3.4.13/3.4.14 client never connects on Java 14+ (an IP address stays
        # "<unresolved>": UnresolvedAddressException); 3.4.10's (1.1's) does
        props.append("-Dzookeeper.version=3.4.10")
    return props


def _cache_dir(version: str) -> str:
    return os.path.expanduser(os.environ.get("PYPROD_KAFKA_CACHE")
                              or f"~/.cache/pyprod/kafka-{version}")


def ensure_kafka_libs(version: str | None = None) -> str:
    """Resolve the Kafka jars once with Maven; return the ``libs`` folder (cached)."""
    version = version or os.environ.get("PYPROD_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    pom = importlib.resources.files(__package__).joinpath("pom.xml")
    cache = _cache_dir(version)
    props = _maven_props(version)

    def resolve(tmp: str) -> None:
        with importlib.resources.as_file(pom) as pom_path:
            run_maven(["-f", str(pom_path), *props,
                       "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"],
                      f"Kafka {version}")
        with contextlib.suppress(OSError):  # a class archive of the old jars is useless
            os.unlink(os.path.join(cache, "kafka-server.jsa"))

    return maven_libs(cache, f"{version} {hashlib.sha256(pom.read_bytes()).hexdigest()}\n",
                      resolve, f"Kafka {version}")


def run_maven(args: list[str], what: str) -> None:
    """``mvn -q -B *args``; KafkaLibsUnavailable with Maven's output when it fails."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaLibsUnavailable(f"no `mvn` on PATH: cannot resolve {what}")
    res = subprocess.run([mvn, "-q", "-B", *args], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise KafkaLibsUnavailable(f"Maven could not resolve {what} (exit {res.returncode}):\n"
                                   + (res.stdout + res.stderr)[-3000:])


def maven_libs(cache: str, stamp_text: str, resolve, what: str) -> str:
    """``<cache>/libs``, filled once by ``resolve(tmp_dir)`` (which copies jars into the
    folder it is given) under a file lock, and again whenever ``stamp_text`` changes."""
    libs, stamp = os.path.join(cache, "libs"), os.path.join(cache, STAMP)

    def fresh() -> bool:
        try:
            with open(stamp) as f:
                return f.read() == stamp_text and os.path.isdir(libs)
        except OSError:
            return False

    if fresh():
        return libs
    os.makedirs(cache, exist_ok=True)
    with file_lock(os.path.join(cache, ".lock")):  # concurrent test workers resolve once
        if fresh():
            return libs
        tmp = libs + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.monotonic()
        resolve(tmp)
        if not os.path.isdir(tmp):
            raise KafkaLibsUnavailable(f"Maven resolved nothing for {what}")
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(tmp, libs)
        with open(stamp, "w") as f:
            f.write(stamp_text)
        log.info("resolved %s into %s in %.1fs", what, libs, time.monotonic() - t0)
    return libs


@contextlib.contextmanager
def file_lock(path: str):
    """Hold an exclusive lock on the file ``path`` (made if missing) between processes: flock
    on POSIX, msvcrt.locking of its first byte on Windows."""
    with open(path, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # Windows
            import msvcrt
            while True:
                f.seek(0)
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)  # gives up after 10 s
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield  # closing the file lets it go

