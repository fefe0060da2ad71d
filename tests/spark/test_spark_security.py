"""format("pyprod") and publish() over the secured listeners of a real Kafka broker
(SecureKafkaCluster), configured with the Java option names of Spark's Kafka sink, read back by
confluent-kafka over the same listener; and no secret in Spark's logs, plans or errors.

How Spark shows a Python data source's options (checked here, Spark 4):
- The physical plan (SQL UI, ``physicalPlanDescription``) shows ``AppendData pyprod`` without
  options; a streaming query's plan shows ``WriteToMicroBatchDataSource pyprod``.
- The logical plan (``AppendData ... [options]``: plan-change logs, QueryExecution strings)
  lists the write options through Spark's redaction: an option whose key or value matches
  spark.redaction.regex ((?i)secret|password|token|access[.]?key) shows as *********(redacted).
  That covers the password options by name and a JAAS string by its ``password=``.
- The options themselves reach only the Python workers (pickled), where pyprod never logs them.
"""
import pytest
from pyspark.sql import functions as F

from tests.harness import readback

N = 200_000
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
REDACTED = "*********(redacted)"


def jaas_scram(user, password):
    return '%s required username="%s" password="%s";' % (SCRAM, user, password)


def sasl_ssl_options(cluster, password=None):
    """Spark's Kafka sink options for SASL_SSL + SCRAM-SHA-512 as alice, trusting the CA
    through the PKCS12 truststore (converted on the executors), host names checked."""
    c = cluster.certs
    return {
        "kafka.bootstrap.servers": cluster.listener("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas_scram("alice", password or cluster.users["alice"]),
        "kafka.ssl.truststore.location": c.truststore_p12,
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": c.truststore_password,
        "kafka.ssl.endpoint.identification.algorithm": "https",
        "kafka.linger.ms": "5",
    }


def secrets_of(cluster):
    return [cluster.users["alice"], cluster.certs.truststore_password]


def assert_clean(text, secrets, what):
    for s in secrets:
        assert s not in text, "a secret is in the %s: ...%s..." % (
            what, text[max(0, text.find(s) - 300):text.find(s)].replace(s, "<SECRET>"))


@pytest.fixture
def jvm_log(spark):
    """Everything the Spark JVM logs (root at DEBUG, plan-change logs on) goes to a string
    instead of the console while the test runs; returns a function giving that text."""
    jvm = spark._jvm
    core = jvm.org.apache.logging.log4j.core
    level = jvm.org.apache.logging.log4j.Level
    text = jvm.java.io.StringWriter()
    appender = core.appender.WriterAppender.createAppender(
        core.layout.PatternLayout.createDefaultLayout(), None, text, "pyprod-test-capture",
        False, True)
    appender.start()
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    root = context.getConfiguration().getRootLogger()
    saved = {name: root.getAppenders().get(name) for name in list(root.getAppenders().keySet())}
    saved_level = root.getLevel()
    for name in saved:
        root.removeAppender(name)
    root.addAppender(appender, level.DEBUG, None)
    root.setLevel(level.DEBUG)
    context.updateLoggers()
    spark.conf.set("spark.sql.planChangeLog.level", "WARN")
    try:
        yield text.toString
    finally:
        spark.conf.unset("spark.sql.planChangeLog.level")
        root.removeAppender("pyprod-test-capture")
        for a in saved.values():
            root.addAppender(a, None, None)
        root.setLevel(saved_level)
        context.updateLoggers()
        appender.stop()


def ui_plans(spark):
    """What the SQL UI shows of each execution: description, call site, physical plan."""
    store = spark._jsparkSession.sharedState().statusStore()
    out, it = [], store.executionsList().iterator()
    while it.hasNext():
        e = it.next()
        out.append("%s\n%s\n%s\n%s" % (e.description(), e.details(), e.physicalPlanDescription(),
                                       e.modifiedConfigs()))
    return "\n".join(out)


def all_worker_logs(spark):
    return "\n".join("%s %s" % (r.logger, r.msg) for r in
                     spark.tvf.python_worker_logs().select("logger", "msg").collect())


def frame(spark, n, partitions=2):
    return spark.range(0, n, numPartitions=partitions).select(
        F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"),
        F.when(F.col("id") % 5 == 0, F.array(F.struct(
            F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))))
        .alias("headers"))


def check_read(read, n, partitions=2):
    """Every row once, with its key and headers; per partition, each task's rows in order."""
    assert len(read) == n
    seen, last = bytearray(n), {}
    for r in read:
        i = int(r.value[1:])
        assert not seen[i], "row %d read twice" % i
        seen[i] = 1
        assert r.key == b"k%d" % (i % 1000)
        assert r.headers == ([("id", str(i).encode())] if i % 5 == 0 else [])
        task = i * partitions // n
        assert last.get((r.partition, task), -1) < i, "partition %d out of order" % r.partition
        last[(r.partition, task)] = i
    assert all(seen)


def save(spark, df, topic, opts, activate):
    activate(spark)
    w = df.write.format("pyprod").mode("append").option("topic", topic)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def test_sasl_ssl_scram_jaas_200k_rows_and_no_secret_anywhere(spark, kafka_secure, topic,
                                                              activate, jvm_log, worker_logs):
    t = topic(3, cluster=kafka_secure)
    opts = sasl_ssl_options(kafka_secure)
    save(spark, frame(spark, N), t, opts, activate)

    security = kafka_secure.client_config("SASL_SSL", mechanism="SCRAM-SHA-512")
    read = readback.read_all_confluent(security["bootstrap_servers"], t, expected_count=N,
                                       timeout=300, security=security)
    check_read(read, N)
    assert any("committed %d records from 2 tasks to %r" % (N, t) in m for m in worker_logs(t))

    secrets = secrets_of(kafka_secure)
    log = jvm_log()
    # the logical plan with the options was logged, redacted by Spark
    assert "kafka.sasl.jaas.config=" + REDACTED in log
    assert "kafka.ssl.truststore.password=" + REDACTED in log
    assert_clean(log, secrets, "Spark JVM log (DEBUG, plan changes)")
    assert_clean(ui_plans(spark), secrets, "SQL UI plans")
    assert_clean(all_worker_logs(spark), secrets, "Python worker logs")


def test_mtls_with_a_pkcs12_keystore_and_no_host_name_check(spark, kafka_secure, topic,
                                                            activate):
    """Client certificate from a PKCS12 keystore (converted to PEM on the executors), the CA
    from a PEM truststore; endpoint identification off."""
    c = kafka_secure.certs
    t = topic(2, cluster=kafka_secure)
    opts = {
        "kafka.bootstrap.servers": kafka_secure.listener("MTLS"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": c.ca_file,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.keystore.location": c.keystore_p12,
        "kafka.ssl.keystore.type": "PKCS12",
        "kafka.ssl.keystore.password": c.keystore_password,
        "kafka.ssl.key.password": c.keystore_password,
        "kafka.ssl.endpoint.identification.algorithm": "",
    }
    save(spark, frame(spark, 5000), t, opts, activate)
    check_read(readback.read_all_confluent(kafka_secure.bootstrap_servers, t,
                                           expected_count=5000), 5000)


def test_oauthbearer_unsecured_jaas(spark, kafka_secure, topic, activate):
    t = topic(1, cluster=kafka_secure)
    opts = {
        "kafka.bootstrap.servers": kafka_secure.listener("SASL_PLAINTEXT"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.jaas.config": '%s required unsecuredLoginStringClaim_sub="alice" '
                                  'unsecuredLoginExtension_traceId="42";' % OAUTH,
    }
    save(spark, frame(spark, 3000, partitions=1), t, opts, activate)
    check_read(readback.read_all_confluent(kafka_secure.bootstrap_servers, t,
                                           expected_count=3000), 3000, partitions=1)


def test_publish_with_dotted_option_names(spark, kafka_secure, topic):
    import pyprod.spark
    t = topic(2, cluster=kafka_secure)
    opts = sasl_ssl_options(kafka_secure)
    bootstrap = opts.pop("kafka.bootstrap.servers")
    n = pyprod.spark.publish(frame(spark, 4000), t, bootstrap_servers=bootstrap, **opts)
    assert n == 4000
    check_read(readback.read_all_confluent(kafka_secure.bootstrap_servers, t,
                                           expected_count=4000), 4000)


def _jobs_in_group(spark, group):
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_unknown_login_module_fails_before_any_task(spark, kafka_secure, topic, activate):
    t = topic(1, cluster=kafka_secure)
    opts = sasl_ssl_options(kafka_secure)
    opts["kafka.sasl.jaas.config"] = ('com.example.CustomLoginModule required '
                                      'password="%s";' % kafka_secure.users["alice"])
    spark.sparkContext.setJobGroup("pyprod-unknown-module", "must not run")
    try:
        with pytest.raises(Exception) as e:
            save(spark, frame(spark, 10, partitions=1), t, opts, activate)
    finally:
        spark.sparkContext.setJobGroup("", "")
    text = str(e.value)
    assert "com.example.CustomLoginModule" in text and "not supported" in text
    assert_clean(text, secrets_of(kafka_secure), "error")
    assert _jobs_in_group(spark, "pyprod-unknown-module") == []


def test_wrong_password_fails_the_job_without_showing_it(spark, kafka_secure, topic, activate,
                                                         tmp_path):
    """Batch and streaming writes with a refused password fail with the broker's refusal;
    neither the error nor the UI plans show the password given."""
    t = topic(1, cluster=kafka_secure)
    wrong = "not-alice-secret-%d" % id(t)
    opts = sasl_ssl_options(kafka_secure, password=wrong)
    with pytest.raises(Exception) as e:
        save(spark, frame(spark, 10, partitions=1), t, opts, activate)
    text = str(e.value)
    assert "SaslAuthenticationFailedError" in text or "AuthenticationFailedError" in text, \
        text[-2000:]
    secrets = secrets_of(kafka_secure) + [wrong]
    assert_clean(text, secrets, "batch error")

    activate(spark)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 10).load() \
        .selectExpr("cast(value as string) as value")
    w = stream.writeStream.format("pyprod").option("topic", t) \
        .option("checkpointLocation", str(tmp_path / "chk"))
    for k, v in opts.items():
        w = w.option(k, v)
    query = w.start()
    try:
        with pytest.raises(Exception) as e:  # raises once the stream has failed
            query.awaitTermination(120)
    finally:
        query.stop()
    text = str(e.value) + query._jsq.explainInternal(True)
    assert "AuthenticationFailed" in text, text[-2000:]
    assert_clean(text, secrets, "streaming error and plan")
    assert_clean(ui_plans(spark), secrets, "SQL UI plans")
