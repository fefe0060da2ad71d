"""aiokafka's producer configuration: its keys, defaults, checks (with their exact ValueError
messages and deprecation warnings), and the pyprod KafkaProducer configuration they become."""
import asyncio
import inspect
import warnings

from pyprod import config as pyprod_config

MISSING = object()  # acks not given: 1, or -1 with idempotence (aiokafka's rule)
INTEGER_MAX_VALUE = 2 ** 31 - 1
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

# aiokafka's AIOKafkaProducer keyword arguments and defaults (but loop and partitioner).
DEFAULTS = {
    "bootstrap_servers": "localhost",
    "client_id": None,
    "metadata_max_age_ms": 300000,
    "request_timeout_ms": 40000,
    "api_version": None,
    "acks": MISSING,
    "key_serializer": None,
    "value_serializer": None,
    "compression_type": None,
    "max_batch_size": 16384,
    "max_request_size": 1048576,
    "linger_ms": 0,
    "retry_backoff_ms": 100,
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "connections_max_idle_ms": 540000,
    "enable_idempotence": False,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "sasl_mechanism": "PLAIN",
    "sasl_plain_password": None,
    "sasl_plain_username": None,
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_domain_name": None,
    "sasl_oauth_token_provider": None,
}


def check(c):
    """aiokafka's checks on ``c`` (DEFAULTS updated with the caller's keys), in its order;
    returns the acks to use (0, 1 or -1) and sets transaction_timeout_ms as aiokafka does."""
    if c["api_version"] is not None:
        warnings.warn("The `api_version` parameter has been deprecated since 0.13.0. "
                      "It is now a no-op and will be removed in a future release. ",
                      DeprecationWarning, stacklevel=4)
    acks = c["acks"]
    if acks not in (0, 1, -1, "all", MISSING):
        raise ValueError("Invalid ACKS parameter")
    if c["compression_type"] not in pyprod_config.CODECS + (None,):
        raise ValueError("Invalid compression type!")
    if c["transactional_id"] is not None:
        c["enable_idempotence"] = True
    else:
        c["transaction_timeout_ms"] = INTEGER_MAX_VALUE
    if c["enable_idempotence"]:
        if acks is MISSING:
            acks = -1
        elif acks not in ("all", -1):
            raise ValueError(f"acks={acks} not supported if enable_idempotence=True")
    acks = 1 if acks is MISSING else -1 if acks == "all" else acks
    _check_security(c)
    return acks


def _check_security(c):
    protocol = c["security_protocol"]
    if protocol not in ("SSL", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError("`security_protocol` should be SSL or PLAINTEXT")
    if protocol in ("SSL", "SASL_SSL") and c["ssl_context"] is None:
        raise ValueError("`ssl_context` is mandatory if security_protocol=='SSL'")
    if protocol in ("SASL_SSL", "SASL_PLAINTEXT"):
        if c["sasl_mechanism"] not in SASL_MECHANISMS:
            raise ValueError("only `PLAIN`, `GSSAPI`, `SCRAM-SHA-256`, `SCRAM-SHA-512` and "
                             "`OAUTHBEARER`sasl_mechanism are supported at the moment")
        if c["sasl_mechanism"] == "PLAIN" and (c["sasl_plain_username"] is None or
                                               c["sasl_plain_password"] is None):
            raise ValueError("sasl_plain_username and sasl_plain_password required for "
                             "PLAIN sasl")


class _LoopTokenProvider:
    """aiokafka's OAUTHBEARER token provider (``async def token()``) for pyprod's I/O thread,
    which asks it on the producer's loop."""

    def __init__(self, provider, loop):
        self._provider, self._loop = provider, loop

    def token(self):
        return asyncio.run_coroutine_threadsafe(self._provider.token(), self._loop).result()

    def extensions(self):
        return self._provider.extensions()


def producer_config(c, acks, partitioner, loop):
    """The pyprod.KafkaProducer configuration for aiokafka's ``c`` (checked). Serializers stay
    in pyprod.aio (send_batch's records come serialized); blocking is bounded by
    request_timeout_ms, as aiokafka's waits are."""
    out = {k: c[k] for k in (
        "bootstrap_servers", "client_id", "metadata_max_age_ms", "request_timeout_ms",
        "compression_type", "max_request_size", "linger_ms", "retry_backoff_ms",
        "security_protocol", "ssl_context", "connections_max_idle_ms", "enable_idempotence",
        "transactional_id")}
    out.update(acks=acks, batch_size=c["max_batch_size"], partitioner=partitioner,
               max_block_ms=c["request_timeout_ms"],
               delivery_timeout_ms=max(pyprod_config.DEFAULTS["delivery_timeout_ms"],
                                       c["linger_ms"] + c["request_timeout_ms"]))
    if c["transactional_id"] is not None:
        out["transaction_timeout_ms"] = c["transaction_timeout_ms"]
    if c["security_protocol"].startswith("SASL_"):
        out.update((k, c[k]) for k in (
            "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
            "sasl_kerberos_service_name", "sasl_kerberos_domain_name",
            "sasl_oauth_token_provider"))
        provider = out["sasl_oauth_token_provider"]
        if provider is not None and inspect.iscoroutinefunction(provider.token):
            out["sasl_oauth_token_provider"] = _LoopTokenProvider(provider, loop)
    return out
