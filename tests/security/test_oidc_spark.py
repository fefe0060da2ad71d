"""format("pyprod")'s OIDC options: Java's OAuthBearerLoginModule clientId/clientSecret/scope/
extension_<name> in kafka.sasl.jaas.config plus kafka.sasl.oauthbearer.token.endpoint.url map
to pyprod's sasl_oauthbearer_* keys, checked on the driver without fetching a token; the
executor-side producer built from them writes to a broker that validates the JWTs (Apache
Kafka's OAuthBearerValidatorCallbackHandler, fixtures in tests/harness/oidc_fixtures.py)."""
import pytest

from pyprod import KafkaProducer
from pyprod.errors import KafkaConfigurationError
from pyprod.spark import options
from tests.harness.readback import read_all
from tests.harness.oidc_provider import TEST_CLIENT_SECRET as SECRET

OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def spark_options(url, bootstrap="127.0.0.1:9093", secret=SECRET, protocol="SASL_PLAINTEXT"):
    return {"kafka.bootstrap.servers": bootstrap, "topic": "t",
            "kafka.security.protocol": protocol, "kafka.sasl.mechanism": "OAUTHBEARER",
            "kafka.sasl.oauthbearer.token.endpoint.url": url,
            "kafka.sasl.jaas.config": (
                '%s required clientId="pyprod" clientSecret="%s" scope="kafka" '
                'extension_logicalCluster="lkc-1";' % (OAUTH, secret))}


def test_option_mapping_without_a_token_fetch():
    # port 1: nothing listens; the driver's check must not try it
    cfg = options.parse(spark_options("http://127.0.0.1:1/token"))[1]
    assert cfg["sasl_oauthbearer_token_endpoint_url"] == "http://127.0.0.1:1/token"
    assert (cfg["sasl_oauthbearer_client_id"], cfg["sasl_oauthbearer_client_secret"],
            cfg["sasl_oauthbearer_scope"]) == ("pyprod", SECRET, "kafka")
    assert cfg["sasl_oauthbearer_extensions"] == {"logicalCluster": "lkc-1"}
    assert "sasl_oauth_token_provider" not in cfg


def test_bad_options_fail_on_the_driver_without_the_secret():
    with pytest.raises(KafkaConfigurationError) as e:
        options.parse(spark_options("ftp://127.0.0.1/token"))
    assert "http(s)" in str(e.value) and SECRET not in str(e.value)
    o = spark_options("http://127.0.0.1:1/token")
    o["kafka.sasl.jaas.config"] = '%s required clientId="pyprod";' % OAUTH
    with pytest.raises(KafkaConfigurationError) as e:
        options.parse(o)
    assert "clientSecret" in str(e.value)


def test_executor_producer_writes(oidc_kafka, idp, topic):
    name = topic(1, cluster=oidc_kafka)
    cfg = options.parse(spark_options(idp.token_url, oidc_kafka.listener("SASL_PLAINTEXT")))[1]
    with KafkaProducer(**cfg) as producer:
        producer.send(name, b"from-spark-options").get(timeout=30)
        provider = producer.config["sasl_oauth_token_provider"]
    provider.close()
    assert [r.value for r in read_all(oidc_kafka.bootstrap_servers, name, expected_count=1)] \
        == [b"from-spark-options"]


def test_java_4_1_client_credentials_option_names():
    o = spark_options("http://127.0.0.1:1/token")
    del o["kafka.sasl.jaas.config"]
    o.update({"kafka.sasl.oauthbearer.client.credentials.client.id": "pyprod",
              "kafka.sasl.oauthbearer.client.credentials.client.secret": SECRET,
              "kafka.sasl.oauthbearer.scope": "kafka"})
    cfg = options.parse(o)[1]
    assert (cfg["sasl_oauthbearer_client_id"], cfg["sasl_oauthbearer_client_secret"]) == \
        ("pyprod", SECRET)
