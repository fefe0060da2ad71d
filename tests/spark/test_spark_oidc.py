"""format("pyprod") over OAUTHBEARER with an OIDC token endpoint (issue 43 part 2), in a real
local Spark: the options of Spark's Kafka sink (kafka.sasl.jaas.config with Java's
OAuthBearerLoginModule clientId/clientSecret/scope/extension_*, and
kafka.sasl.oauthbearer.token.endpoint.url), a broker that validates the JWTs with Apache Kafka's
OAuthBearerValidatorCallbackHandler (tests/harness/oidc_fixtures.py), the rows read back by
confluent-kafka. The token is fetched by the executors' producers (the Python workers): the
driver only parses the options, and a refused client secret fails the job's tasks with the
producer's SaslAuthenticationFailedError, the secret nowhere in the error or Spark's logs."""
import pytest

from tests.harness import readback
from tests.harness.oidc_fixtures import idp, oidc_kafka  # noqa: F401  (pytest fixtures)
from tests.harness.oidc_provider import TEST_CLIENT_SECRET as SECRET
from tests.security.test_oidc_spark import spark_options
from tests.spark.test_spark_security import (  # noqa: F401  (jvm_log: a pytest fixture)
    REDACTED, _jobs_in_group, all_worker_logs, assert_clean, check_read, frame, jvm_log, save,
    ui_plans)

N = 20_000
WRONG = "wrong-oidc-secret-value"


def oidc_options(cluster, idp, listener="SASL_PLAINTEXT", secret=SECRET):
    """Spark's Kafka sink options for ``listener`` of ``cluster`` (REAUTH: SASL_SSL, the CA
    as a PEM truststore, 10 s re-authentication) signing in through ``idp``."""
    protocol = cluster.protocol(listener)
    opts = spark_options(idp.token_url, cluster.listener(listener), secret, protocol)
    del opts["topic"]  # save() gives the topic
    if protocol == "SASL_SSL":
        opts.update({"kafka.ssl.truststore.location": cluster.certs.ca_file,
                     "kafka.ssl.truststore.type": "PEM"})
    opts["kafka.linger.ms"] = "5"
    return opts


def read(cluster, t, n):
    return readback.read_all_confluent(cluster.bootstrap_servers, t, expected_count=n,
                                       timeout=120)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "REAUTH"])
def test_batch_write_reads_back_and_no_secret_anywhere(spark, oidc_kafka, idp, topic, listener,
                                                       activate, jvm_log, worker_logs):
    t = topic(3, cluster=oidc_kafka)
    fetches = idp.fetches
    save(spark, frame(spark, N), t, oidc_options(oidc_kafka, idp, listener), activate)
    check_read(read(oidc_kafka, t, N), N)
    assert any("committed %d records from 2 tasks to %r" % (N, t) in m for m in worker_logs(t))
    # each executor's producer fetched its token (a worker's cached producer may serve both)
    assert 1 <= idp.fetches - fetches <= 2
    log = jvm_log()
    assert "kafka.sasl.jaas.config=" + REDACTED in log  # the plan was logged, redacted
    assert_clean(log, [SECRET], "Spark JVM log (DEBUG, plan changes)")
    assert_clean(ui_plans(spark), [SECRET], "SQL UI plans")
    assert_clean(all_worker_logs(spark), [SECRET], "Python worker logs")


def test_streaming_write(spark, oidc_kafka, idp, topic, activate, tmp_path):
    """writeStream.format("pyprod") of a file source, availableNow: one query, every row."""
    t, n = topic(2, cluster=oidc_kafka), 5000
    frame(spark, n).write.parquet(str(tmp_path / "in"))
    activate(spark)
    rows = spark.readStream.schema(frame(spark, 1).schema).parquet(str(tmp_path / "in"))
    w = rows.writeStream.format("pyprod").option("topic", t) \
        .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True)
    for k, v in oidc_options(oidc_kafka, idp).items():
        w = w.option(k, v)
    query = w.start()
    try:
        query.awaitTermination()
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got = read(oidc_kafka, t, n)
    assert sorted(int(r.value[1:]) for r in got) == list(range(n))
    for r in got:
        i = int(r.value[1:])
        assert r.key == b"k%d" % (i % 1000)
        assert r.headers == ([("id", str(i).encode())] if i % 5 == 0 else [])


def test_driver_makes_no_token_request(spark, oidc_kafka, idp, topic, activate):
    """The driver parses the OIDC options (writer()) and fails the job on its schema (no
    'value' column) before any task: no token request reached the idp."""
    t = topic(1, cluster=oidc_kafka)
    requests = idp.requests
    spark.sparkContext.setJobGroup("pyprod-oidc-driver", "must not run")
    try:
        with pytest.raises(Exception) as e:
            save(spark, frame(spark, 10).select("key"), t, oidc_options(oidc_kafka, idp),
                 activate)
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert "required column 'value' not found" in str(e.value)  # the options parsed
    assert _jobs_in_group(spark, "pyprod-oidc-driver") == []
    assert idp.requests == requests


def test_wrong_client_secret_fails_the_tasks_without_showing_it(spark, oidc_kafka, idp, topic,
                                                                activate, jvm_log):
    """The token endpoint refuses the secret: the tasks (each attempt) fail with the
    producer's SaslAuthenticationFailedError, the job with them; the secret given is in
    neither the error nor Spark's logs, and the token requests came from the tasks only."""
    t = topic(1, cluster=oidc_kafka)
    requests, fetches = idp.requests, idp.fetches
    spark.sparkContext.setJobGroup("pyprod-oidc-wrong", "fails in its tasks")
    try:
        with pytest.raises(Exception) as e:
            save(spark, frame(spark, 10, partitions=1), t,
                 oidc_options(oidc_kafka, idp, secret=WRONG), activate)
    finally:
        spark.sparkContext.setJobGroup("", "")
    text = str(e.value)
    assert "SaslAuthenticationFailedError" in text, text[-2000:]
    assert "refused the client credentials" in text and "invalid_client" in text, text[-2000:]
    # raised in a task's write (its producer's first fetch), not in the driver's writer()
    assert "cache.acquire(settings.configs)" in text and "_fetch()" in text, text[-2000:]
    assert len(_jobs_in_group(spark, "pyprod-oidc-wrong")) == 1
    assert idp.requests > requests and idp.fetches == fetches
    assert_clean(text, [WRONG, SECRET], "job error")
    assert_clean(jvm_log(), [WRONG, SECRET], "Spark JVM log (DEBUG, plan changes)")
    assert_clean(ui_plans(spark), [WRONG, SECRET], "SQL UI plans")
    assert_clean(all_worker_logs(spark), [WRONG, SECRET], "Python worker logs")
    assert readback.read_all_confluent(oidc_kafka.bootstrap_servers, t, timeout=5) == []
