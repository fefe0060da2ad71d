"""SASL mechanisms (Java's SaslClient implementations, one file each).

A mechanism is created per authentication, from the producer config and the broker's host:
``first()`` gives the client's initial response; ``evaluate(challenge)`` gives the next client
message, or None once the exchange is complete on the client's side. Failures raise
``SaslAuthenticationFailedError``; nothing a mechanism raises or logs carries a secret.
"""
from pyprod.errors import KafkaConfigurationError
from pyprod.sasl import aws_msk_iam, oidc_token_provider
from pyprod.sasl.gssapi import GssapiSaslClient
from pyprod.sasl.oauthbearer import OAuthBearerSaslClient
from pyprod.sasl.plain import PlainSaslClient
from pyprod.sasl.scram import ScramSaslClient

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI",
              "AWS_MSK_IAM")


def create(config, host):
    """A fresh mechanism object for config['sasl_mechanism'] towards broker ``host``."""
    name = config["sasl_mechanism"]
    if name == "PLAIN":
        return PlainSaslClient(config["sasl_plain_username"], config["sasl_plain_password"])
    if name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramSaslClient(name, config["sasl_plain_username"], config["sasl_plain_password"])
    if name == "OAUTHBEARER":
        return OAuthBearerSaslClient(config["sasl_oauth_token_provider"])
    if name == "GSSAPI":
        return GssapiSaslClient(config["sasl_kerberos_service_name"],
                                config["sasl_kerberos_domain_name"] or host,
                                config["sasl_kerberos_name"])
    if name == "AWS_MSK_IAM":
        # the producer's credentials, resolved at its construction (no I/O here)
        return aws_msk_iam.AwsMskIamSaslClient(host, config[aws_msk_iam.CREDENTIALS_KEY])
    raise KafkaConfigurationError("sasl_mechanism must be one of %s, got %r" % (MECHANISMS, name))


def check_config(config):
    """Fail at construction for a SASL config that cannot work (no secret in the message)."""
    name = config["sasl_mechanism"]
    if name not in MECHANISMS:
        raise KafkaConfigurationError(
            "sasl_mechanism must be one of %s, got %r" % (MECHANISMS, name))
    if name in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for key in ("sasl_plain_username", "sasl_plain_password"):
            if not isinstance(config[key], str) or not config[key]:
                raise KafkaConfigurationError("%s is required for sasl_mechanism %s" % (key, name))
    elif name == "OAUTHBEARER":
        provider = config["sasl_oauth_token_provider"]
        if provider is None and config.get("sasl_oauthbearer_token_endpoint_url"):
            # OIDC client credentials: checked here, the producer makes the provider
            oidc_token_provider.check_settings(config["sasl_oauthbearer_token_endpoint_url"],
                                               config["sasl_oauthbearer_client_id"],
                                               config["sasl_oauthbearer_client_secret"])
        elif provider is None or not callable(getattr(provider, "token", None)):
            raise KafkaConfigurationError(
                "sasl_oauth_token_provider (an object with a token() method) is required "
                "for sasl_mechanism OAUTHBEARER")
    elif name == "AWS_MSK_IAM":
        if config["security_protocol"] != "SASL_SSL":  # kafka-python's rule
            raise KafkaConfigurationError("AWS_MSK_IAM requires SASL_SSL")
        aws_msk_iam.check_available()
    elif name == "GSSAPI":
        try:
            import gssapi  # noqa: F401
        except ImportError:
            raise KafkaConfigurationError(
                "sasl_mechanism GSSAPI needs the 'gssapi' package (pip install gssapi)") from None
