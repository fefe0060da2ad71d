"""Spark's own Kafka source and sink (spark-sql-kafka-0-10) for the installed pyspark: the jars
resolved once with Maven into ``~/.cache/pyprod/spark-kafka-<version>/libs`` (or
``$PYPROD_SPARK_KAFKA_CACHE``), less every artifact pyspark already ships (spark-core,
scala-library, hadoop, lz4, snappy, slf4j...), so the classpath holds each class once.

    jars = spark_kafka_jars()          # [path, ...] for spark.jars
    spark.config("spark.jars", ",".join(jars))

The version is pyspark's (``$PYPROD_SPARK_KAFKA_VERSION`` overrides it). When Maven cannot
resolve it, the newest served version of FALLBACK_VERSIONS is used (with a warning; the miss
is remembered for a day in the version's cache folder); when none resolves, KafkaLibsUnavailable
says why, with Maven's output."""
from __future__ import annotations

import glob
import hashlib
import os
import re
import time
import warnings

from pyprod.local_broker.jars import KafkaLibsUnavailable, maven_libs, run_maven

__all__ = ["spark_kafka_jars", "pyspark_artifacts", "ARTIFACT", "FALLBACK_VERSIONS"]

ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"
# newest first: pyspark 4.3.0 was installable before its connector could be resolved
FALLBACK_VERSIONS = ("4.2.0",)
MISSING = "missing"      # marker file: Maven could not resolve this version
MISSING_TTL_S = 86400

# A pom that is no build: `mvn dependency:copy-dependencies` copies the connector and its
# runtime dependencies (spark-core, spark-sql... are "provided" there, so not copied).
_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pyprod.local_broker</groupId>
  <artifactId>spark-kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""

_JAR = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^/]*)\.jar$")


def _pyspark():
    import pyspark
    return pyspark


def pyspark_artifacts() -> list[str]:
    """The artifact ids of the jars pyspark ships (``spark-core_2.13``, ``scala-library``...)."""
    jars = os.path.join(os.path.dirname(os.path.abspath(_pyspark().__file__)), "jars")
    names = (_JAR.match(os.path.basename(p)) for p in glob.glob(os.path.join(jars, "*.jar")))
    return sorted({m.group("artifact") for m in names if m})


def _cache_dir(version: str) -> str:
    return os.path.expanduser(os.environ.get("PYPROD_SPARK_KAFKA_CACHE")
                              or f"~/.cache/pyprod/spark-kafka-{version}")


def spark_kafka_jars(version: str | None = None) -> list[str]:
    """Paths of the connector's jars that pyspark lacks (resolved once, cached)."""
    wanted = (version or os.environ.get("PYPROD_SPARK_KAFKA_VERSION")
              or _pyspark().__version__)
    try:
        return _jars(wanted)
    except KafkaLibsUnavailable as e:
        if version or os.environ.get("PYPROD_SPARK_KAFKA_VERSION"):
            raise
        first = e
    for other in FALLBACK_VERSIONS:
        if other == wanted:
            continue
        try:
            jars = _jars(other)
        except KafkaLibsUnavailable:
            continue
        warnings.warn("%s:%s cannot be resolved: using %s with pyspark %s"
                      % (ARTIFACT, wanted, other, wanted), stacklevel=2)
        return jars
    raise first


def _jars(version):
    pom = _POM.format(version=version)
    shipped = pyspark_artifacts()
    stamp_text = "%s %s\n" % (version, hashlib.sha256(
        (pom + ",".join(shipped)).encode()).hexdigest())
    cache = _cache_dir(version)
    missing = os.path.join(cache, MISSING)
    try:
        with open(missing) as f:
            why = f.read()
        if time.time() - os.path.getmtime(missing) < MISSING_TTL_S:
            raise KafkaLibsUnavailable(why)
    except FileNotFoundError:
        pass

    def resolve(tmp):
        pom_path = os.path.join(cache, "pom.xml")
        with open(pom_path, "w") as f:
            f.write(pom)
        # what pyspark ships stays out, whatever its version in the connector's tree
        try:
            run_maven(["-f", pom_path, "dependency:copy-dependencies", "-DincludeScope=runtime",
                       "-DoutputDirectory=" + tmp, "-DexcludeArtifactIds=" + ",".join(shipped)],
                      "%s:%s" % (ARTIFACT, version))
        except KafkaLibsUnavailable as e:
            with open(missing, "w") as f:
                f.write(str(e))
            raise

    libs = maven_libs(cache, stamp_text, resolve, "%s:%s" % (ARTIFACT, version))
    jars = sorted(glob.glob(os.path.join(libs, "*.jar")))
    if not any(os.path.basename(j).startswith("spark-sql-kafka-0-10") for j in jars):
        raise KafkaLibsUnavailable("no spark-sql-kafka jar in %s: %s" % (libs, jars))
    return jars
