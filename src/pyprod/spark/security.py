"""Spark's Kafka security options -> pyprod's security keys.

``kafka.security.protocol``, ``kafka.sasl.mechanism`` and ``kafka.sasl.kerberos.service.name``
map by name like any other config. This module takes the options that do not:

- ``kafka.sasl.jaas.config`` (see :mod:`pyprod.spark.jaas`): its login module gives
  sasl_plain_username/password, sasl_oauth_token_provider or sasl_kerberos_service_name, and
  sasl_mechanism when ``kafka.sasl.mechanism`` is unset and the module has one mechanism.
- ``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``, ``kafka.ssl.key.password`` (see
  :mod:`pyprod.spark.stores`) and ``kafka.ssl.endpoint.identification.algorithm`` ('' ->
  ssl_check_hostname=False, 'https' -> True).

A pyprod key set both this way and directly (e.g. ``kafka.sasl.plain.password`` next to a
JAAS config) must agree, or the options fail naming both. Secrets (passwords, JAAS values,
tokens) never appear in a message: options are named, values are not.
"""
from __future__ import annotations

from pyprod.errors import KafkaConfigurationError
from pyprod.spark import jaas, stores

# Java option names (without 'kafka.') whose values are secrets.
SECRET_OPTIONS = frozenset((
    "sasl.jaas.config", "ssl.truststore.password", "ssl.keystore.password",
    "ssl.key.password", "ssl.password", "sasl.plain.password"))

_STORE_SOURCES = {"ssl_cafile": "kafka.ssl.truststore.location",
                  "ssl_certfile": "kafka.ssl.keystore.location",
                  "ssl_password": "kafka.ssl.key.password",
                  "ssl_check_hostname": "kafka.ssl.endpoint.identification.algorithm"}


def is_secret(name):
    """Whether option ``name`` (Java or pyprod spelling, 'kafka.' optional) holds a secret."""
    low = name.lower()
    if low.startswith("kafka."):
        low = low[len("kafka."):]
    low = low.replace("_", ".")
    return low in SECRET_OPTIONS or any(w in low for w in ("password", "secret", "token"))


def extract(props):
    """Pop the options this module handles from ``props`` (Java names without 'kafka.',
    lower case; modified in place). Returns (configs, sources): pyprod keys and, for each,
    the option that set it."""
    configs, sources = {}, {}
    for key, value in stores.from_options(props).items():
        configs[key] = value
        sources[key] = _STORE_SOURCES[key]
    text = props.pop("sasl.jaas.config", None)
    if text is not None:
        module = jaas.parse(text)
        mechanism = props.get("sasl.mechanism")
        for key, value in jaas.to_configs(module, mechanism).items():
            configs[key] = value
            sources[key] = jaas.OPTION
    return configs, sources


def merge(explicit, derived, sources, spelling):
    """``explicit`` configs plus ``derived`` ones; a key both set must have one value.
    ``spelling(key)`` names an explicit key as the user wrote it."""
    out = dict(explicit)
    for key, value in derived.items():
        for clash in stores.SETS.get(key, (key,)) if isinstance(value, stores.Store) else (key,):
            if clash in explicit and not (clash == key and explicit[clash] == value):
                raise KafkaConfigurationError(
                    "%s and %s both set %s: set one of them" % (
                        sources[key], spelling(clash), clash))
        out[key] = value
    return out
