"""pytest fixtures of the OIDC tests (tests/security/test_oidc*.py, tests/spark/test_spark_oidc.py;
a conftest or test module imports them): ``idp``, an OIDC identity provider on 127.0.0.1
(:mod:`tests.harness.oidc_provider`, client "pyprod" with ``TEST_CLIENT_SECRET``), and
``oidc_kafka``, a broker whose SASL_PLAINTEXT and REAUTH (SASL_SSL, 10 s re-auth) listeners
validate its JWTs with Apache Kafka's OAuthBearerValidatorCallbackHandler (JWKS, expected
audience 'kafka')."""
import pytest

from tests.harness.oidc_provider import TEST_CLIENT_SECRET as SECRET, OidcProvider
from tests.harness.security import SecureKafkaCluster

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def idp():
    with OidcProvider({"pyprod": SECRET}) as provider:
        yield provider


@pytest.fixture(scope="module")
def oidc_kafka(idp):
    """One broker whose SASL_PLAINTEXT and REAUTH (10 s re-auth) listeners validate JWTs."""
    props = {"sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
             "sasl.oauthbearer.expected.audience": "kafka"}
    for listener in ("sasl_plaintext", "reauth"):
        prefix = "listener.name.%s.oauthbearer" % listener
        props[prefix + ".sasl.server.callback.handler.class"] = VALIDATOR
        props[prefix + ".sasl.jaas.config"] = (
            LOGIN + ' required unsecuredLoginStringClaim_sub="kafka";')
    cluster = SecureKafkaCluster(kerberos=False, broker_props=props, jvm_opts=[
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=" + idp.jwks_url])
    cluster.start()
    yield cluster
    cluster.stop(kill=True)
