"""Producer configuration: kafka-python's keys, defaults and validation.

Keys are kafka-python 3.x's, plus the 2.x keys it dropped (``buffer_memory`` is live here: it sizes
the BufferPool). Java-style dotted names (``linger.ms``) map to these by ``from_java_names``.
Every key either works or is refused; the few with nothing to act on here (kafka-python's own
network internals) log a warning when set (``_NO_EFFECT``).
"""
import itertools
import logging
import socket

from kcore import compression_type
from pyprod import sasl
from pyprod.config_values import number_from_text  # noqa: F401 (config.number_from_text)
from pyprod.errors import KafkaConfigurationError
from pyprod.socks5 import Socks5Proxy, redact

log = logging.getLogger(__name__)

CODECS = compression_type.CODECS  # the compression_type values, "none" (= None) aside
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

DEFAULTS = {
    "bootstrap_servers": "localhost",
    "client_id": None,
    "key_serializer": None,
    "value_serializer": None,
    "enable_idempotence": True,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "delivery_timeout_ms": 120000,
    "acks": -1,
    "compression_type": None,
    "retries": float("inf"),
    "batch_size": 16384,
    # An open batch the Sender has not taken yet keeps taking records past batch_size up to
    # this many bytes (KIP-782); None: max(batch_size, 960 KiB). Never above max_request_size.
    "batch_max_size": None,
    "linger_ms": 0,
    "partitioner": None,
    "buffer_memory": 32 * 1024 * 1024,
    "connections_max_idle_ms": 9 * 60 * 1000,
    "max_block_ms": 60000,
    "max_request_size": 1048576,
    "allow_auto_create_topics": True,
    "metadata_max_age_ms": 300000,
    "metadata_max_idle_ms": 300000,  # Java's metadata.max.idle.ms; kafka-python has none
    "client_dns_lookup": "use_all_dns_ips",
    "retry_backoff_ms": 100,
    "request_timeout_ms": 30000,
    # kafka-python 3's: blocking calls without a timeout of their own (none in pyprod)
    "default_api_timeout_ms": 60000,
    # kafka-python 3's connection manager (and Java's): setup deadline, growing per failure
    "socket_connection_setup_timeout_ms": 10000,
    "socket_connection_setup_timeout_max_ms": 30000,
    "receive_message_max_bytes": 100_000_000,
    "receive_buffer_bytes": None,
    "send_buffer_bytes": None,
    "socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 30000,
    "max_in_flight_requests_per_connection": 5,
    "security_protocol": "PLAINTEXT",
    "ssl_context": None,
    "ssl_check_hostname": True,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_crlfile": None,
    "ssl_password": None,
    "ssl_ciphers": None,
    "api_version": None,
    "bootstrap_timeout_ms": 30000,
    "metric_reporters": [],
    "metrics_enabled": True,
    "metrics_num_samples": 2,
    "metrics_sample_window_ms": 30000,
    "selector": None,
    "sasl_mechanism": None,
    "sasl_plain_username": None,
    "sasl_plain_password": None,
    "sasl_kerberos_name": None,
    "sasl_kerberos_service_name": "kafka",
    "sasl_kerberos_domain_name": None,
    "sasl_oauth_token_provider": None,
    # OIDC client credentials (KIP-768): Java/librdkafka sasl.oauthbearer.* dotted names
    "sasl_oauthbearer_token_endpoint_url": None,
    "sasl_oauthbearer_client_id": None,
    "sasl_oauthbearer_client_secret": None,
    "sasl_oauthbearer_scope": None,
    "sasl_oauthbearer_extensions": None,
    "proxy_url": None,
    "socks5_proxy": None,
    "kafka_client": None,
}

# kafka-python 2.x keys 3.x dropped. api_version_auto_timeout_ms: 2.x's bound on the
# constructor's broker check, used as bootstrap_timeout_ms (3.x's name) when only it is given;
# the others tune kafka-python's own network layer (_NO_EFFECT).
LEGACY = {
    "api_version_auto_timeout_ms": 2000,
    "sock_chunk_bytes": 4096,
    "sock_chunk_buffer_count": 1000,
    "bootstrap_topics_filter": set(),
}

_NON_NEGATIVE = (
    "batch_size", "linger_ms", "max_block_ms", "retry_backoff_ms", "reconnect_backoff_ms",
    "reconnect_backoff_max_ms", "metadata_max_age_ms", "metadata_max_idle_ms", "connections_max_idle_ms",
    "bootstrap_timeout_ms", "retries",
)
_POSITIVE = (
    "buffer_memory", "max_request_size", "request_timeout_ms", "delivery_timeout_ms",
    "max_in_flight_requests_per_connection", "receive_message_max_bytes",
    "default_api_timeout_ms", "socket_connection_setup_timeout_ms",
    "socket_connection_setup_timeout_max_ms", "metrics_sample_window_ms",
)
DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
# kafka-python keys for its own network layer: nothing here to act on; a value other than the
# default logs why (key -> what pyprod does instead)
_NO_EFFECT = {
    "selector": "pyprod polls its sockets with its own selector (kcore)",
    "kafka_client": "pyprod connects with its own network client",
    "sock_chunk_bytes": "pyprod reads and writes whole buffers",
    "sock_chunk_buffer_count": "pyprod reads and writes whole buffers",
    "bootstrap_topics_filter": "pyprod's first metadata request names the topics sent to",
}
_client_ids = itertools.count(1)
# batch_max_size's default, if batch_size is smaller: under the smallest default limit on a
# batch a broker has had (message.max.bytes, 1,000,012 bytes before Kafka 1.1)
BATCH_MAX_SIZE = 960 * 1024


# Java 4.1+'s names (KIP-1139) for the OIDC client credentials; librdkafka's map directly
_JAVA_ALIASES = {"sasl.oauthbearer.client.credentials.client.id": "sasl_oauthbearer_client_id",
                 "sasl.oauthbearer.client.credentials.client.secret":
                     "sasl_oauthbearer_client_secret"}


def from_java_names(props):
    """Map Java-style keys (``linger.ms``) to pyprod's (``linger_ms``); unknown keys raise."""
    out = {}
    for name, value in props.items():
        key = _JAVA_ALIASES.get(name) or name.replace(".", "_").replace("-", "_")
        if key not in DEFAULTS and key not in LEGACY:
            raise KafkaConfigurationError("Unrecognized producer config: %r" % (name,))
        out[key] = value
    return out


def parse_bootstrap(servers):
    """'h1:9092,h2' or ['h1:9092', ...] -> [(host, port)]; IPv6 as [::1]:9092."""
    if isinstance(servers, str):
        servers = servers.split(",")
    if not isinstance(servers, (list, tuple)) or not servers:
        raise KafkaConfigurationError("bootstrap_servers must be a str or a list of 'host:port'")
    out = []
    for entry in servers:
        if not isinstance(entry, str) or not entry.strip():
            raise KafkaConfigurationError("Bad bootstrap server: %r" % (entry,))
        entry = entry.strip()
        host, port = entry, 9092
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            if rest.startswith(":"):
                port = rest[1:]
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        try:
            port = int(port)
        except ValueError:
            raise KafkaConfigurationError("Bad port in bootstrap server %r" % (entry,)) from None
        if not host or not 0 < port < 65536:
            raise KafkaConfigurationError("Bad bootstrap server: %r" % (entry,))
        out.append((host, port))
    return out


# Never shown: repr() of a config gives '***' for these, and the proxy URLs without password.
SECRETS = frozenset(("sasl_plain_password", "ssl_password", "sasl_oauth_token_provider",
                     "sasl_oauthbearer_client_secret"))
_PROXY_KEYS = ("proxy_url", "socks5_proxy")


def _shown(key, value):
    if value is None:
        return "None"
    if key in SECRETS:
        return "'***'"
    return repr(redact(value)) if key in _PROXY_KEYS else repr(value)


class ProducerConfig(dict):
    """The built config: a dict whose repr() hides the secrets."""
    __slots__ = ()

    def __repr__(self):
        return "{%s}" % ", ".join("%r: %s" % (k, _shown(k, v)) for k, v in self.items())

    __str__ = __repr__


def build(**configs):
    """Defaults + user configs, validated and normalized, as kafka-python does."""
    unknown = set(configs) - set(DEFAULTS) - set(LEGACY)
    if unknown:
        raise KafkaConfigurationError("Unrecognized configs: %s" % (sorted(unknown),))
    config = ProducerConfig(DEFAULTS)
    config.update((k, v) for k, v in configs.items() if k in DEFAULTS)
    user = set(configs)
    if "api_version_auto_timeout_ms" in user and "bootstrap_timeout_ms" not in user:
        config["bootstrap_timeout_ms"] = configs["api_version_auto_timeout_ms"]

    if config["client_id"] is None:
        config["client_id"] = "pyprod-producer-%d" % next(_client_ids)
    config["bootstrap"] = parse_bootstrap(config["bootstrap_servers"])
    _check_numbers(config)
    _check_network(config, user)
    _check_metrics(config)
    for key, instead in _NO_EFFECT.items():
        default = DEFAULTS[key] if key in DEFAULTS else LEGACY[key]
        if key in user and configs[key] != default:
            log.warning("%s=%r has no effect: %s", key, configs[key], instead)
    config["acks"] = _acks(config["acks"])
    config["compression_type"] = _codec(config["compression_type"])
    _check_security(config)
    config["api_version"] = _api_version(config["api_version"])
    if config["compression_type"] == "zstd" and config["api_version"] is not None and \
            config["api_version"] < (2, 1):  # kafka-python's check, and its words
        raise KafkaConfigurationError("Zstd Requires >= Kafka 2.1 Brokers (api_version=%s)"
                                      % (config["api_version"],))
    _check_transactions(config)
    _check_idempotence(config, user)
    _check_delivery_timeout(config, user)
    config["batch_max_size"] = _batch_max_size(config)
    return config


def _api_version(version):
    """None (ask the broker), or a tuple of ints; 2.x's "0.11.0" strings ("auto": None) still
    work (a malformed one raises ValueError, as in kafka-python)."""
    if isinstance(version, str):
        return None if version == "auto" else tuple(int(p) for p in version.split("."))
    if isinstance(version, list):
        version = tuple(version)
    if version is not None and (not isinstance(version, tuple) or not version or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in version)):
        raise KafkaConfigurationError("api_version must be None or a tuple of ints such as "
                                      "(2, 8), got %r" % (version,))
    return version


def _check_numbers(config):
    for key in _NON_NEGATIVE + _POSITIVE:
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KafkaConfigurationError("%s must be a number, got %r" % (key, value))
        if value < 0 or (value == 0 and key in _POSITIVE):
            raise KafkaConfigurationError("%s must be %s, got %r" % (
                key, "> 0" if key in _POSITIVE else ">= 0", value))
    if config["buffer_memory"] < config["batch_size"]:
        raise KafkaConfigurationError("buffer_memory must be >= batch_size")


def _check_network(config, user):
    """client_dns_lookup, the setup and API timeouts, and the proxy (config["proxy"]: a
    Socks5Proxy or None) as kafka-python 3 reads them."""
    lookup = config["client_dns_lookup"]
    if lookup not in DNS_LOOKUPS:
        raise KafkaConfigurationError("client_dns_lookup must be one of %s; got %r"
                                      % (DNS_LOOKUPS, lookup))
    if lookup == DNS_LOOKUPS[1]:
        config["bootstrap"] = canonical_bootstrap(config["bootstrap"])
    floor = config["request_timeout_ms"]
    if config["default_api_timeout_ms"] < floor:
        if "default_api_timeout_ms" in user:
            raise KafkaConfigurationError("default_api_timeout_ms (%s) must be >= "
                                          "request_timeout_ms (%s)."
                                          % (config["default_api_timeout_ms"], floor))
        config["default_api_timeout_ms"] = floor
    if config["socket_connection_setup_timeout_max_ms"] < \
            config["socket_connection_setup_timeout_ms"]:
        raise KafkaConfigurationError("socket_connection_setup_timeout_max_ms must be >= "
                                      "socket_connection_setup_timeout_ms")
    url, key = config["proxy_url"], "proxy_url"
    if config["socks5_proxy"] is not None:
        if url is None:
            log.warning("socks5_proxy is deprecated, use proxy_url instead")
            url, key = config["socks5_proxy"], "socks5_proxy"
        elif config["socks5_proxy"] != url:
            log.warning("socks5_proxy %s is not used: proxy_url %s is set",
                        redact(config["socks5_proxy"]), redact(url))
    config["proxy"] = None if url is None else Socks5Proxy(url, key)


def canonical_bootstrap(bootstrap):
    """client_dns_lookup=resolve_canonical_bootstrap_servers_only: each bootstrap host becomes
    its canonical names (getaddrinfo's AI_CANONNAME), one entry each, as kafka-python 3 does; a
    host that does not resolve stays as given."""
    out = []
    for host, port in bootstrap:
        try:
            infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0,
                                       socket.AI_CANONNAME)
        except (OSError, UnicodeError) as e:
            log.warning("Canonical bootstrap resolution failed for %s:%s: %s; keeping it",
                        host, port, e)
            infos = ()
        for name in [info[3] for info in infos if info[3]] or [host]:
            if (name, port) not in out:
                out.append((name, port))
    return out


def _check_metrics(config):
    """kafka-python's MetricConfig and reporter rules; producer_metrics reads them."""
    samples = config["metrics_num_samples"]
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise KafkaConfigurationError("metrics_num_samples must be an int >= 1 (The number of "
                                      "samples must be at least 1.), got %r" % (samples,))
    reporters = config["metric_reporters"]
    if not isinstance(reporters, (list, tuple)) or not all(callable(r) for r in reporters):
        raise KafkaConfigurationError("metric_reporters must be a list of reporter classes "
                                      "(each called with no arguments), got %r" % (reporters,))


def _batch_max_size(config):
    """The effective batch_max_size: at least batch_size, at most max_request_size."""
    value = config["batch_max_size"]
    if value is None:
        value = BATCH_MAX_SIZE
    elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KafkaConfigurationError("batch_max_size must be an int >= 1, got %r" % (value,))
    return max(min(max(value, config["batch_size"]), config["max_request_size"]), 1)


def _acks(acks):
    normal = {0: 0, 1: 1, -1: -1, "all": -1, "0": 0, "1": 1, "-1": -1}
    if isinstance(acks, bool) or acks not in normal:
        raise KafkaConfigurationError("acks must be 0, 1, 'all' or -1, got %r" % (acks,))
    return normal[acks]


def _codec(codec):
    if codec in (None, "none"):
        return None
    if codec not in CODECS:
        raise KafkaConfigurationError("Not supported codec: %r (use one of %s)" % (codec, CODECS))
    return codec


def _check_security(config):
    proto = config["security_protocol"]
    if proto not in SECURITY_PROTOCOLS:
        raise KafkaConfigurationError("security_protocol must be one of %s" % (SECURITY_PROTOCOLS,))
    if proto.startswith("SASL_"):
        sasl.check_config(config)


def _check_transactions(config):
    """transactional_id: a non-empty str (Java's NonEmptyString); transaction_timeout_ms: a
    positive int32 (the broker refuses one above its transaction.max.timeout.ms, at
    init_transactions)."""
    tid = config["transactional_id"]
    if tid is not None and (not isinstance(tid, str) or not tid):
        raise KafkaConfigurationError("transactional_id must be a non-empty str, got %r" % (tid,))
    timeout = config["transaction_timeout_ms"]
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout < 1 << 31:
        raise KafkaConfigurationError(  # InitProducerId sends it as an int32
            "transaction_timeout_ms must be an int in 1..2**31-1, got %r" % (timeout,))


def _check_idempotence(config, user):
    """kafka-python 3.x's rules (KIP-679): idempotence is on by default; a conflicting config
    the user set (acks != all, retries=0, more than 5 requests in flight, an api_version older
    than 0.11) fails if the user asked for idempotence or transactions, else turns it off."""
    asked = "enable_idempotence" in user
    if config["transactional_id"] is not None:
        if asked and not config["enable_idempotence"]:
            raise KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
        config["enable_idempotence"] = True
        asked = True  # transactions are strict: every conflict raises
    if not config["enable_idempotence"]:
        return
    conflicts = []
    if "acks" in user and config["acks"] != -1:
        conflicts.append(("acks", config["acks"]))
    if "retries" in user and config["retries"] == 0:
        conflicts.append(("retries", 0))
    if "max_in_flight_requests_per_connection" in user and \
            config["max_in_flight_requests_per_connection"] > 5:
        conflicts.append(("max_in_flight_requests_per_connection",
                          config["max_in_flight_requests_per_connection"]))
    if conflicts:
        what = ", ".join("%s=%r" % kv for kv in conflicts)
        if asked:
            raise KafkaConfigurationError(
                "enable_idempotence=True is incompatible with user-provided %s" % (what,))
        log.warning("Idempotence will be disabled because user-provided config conflicts with"
                    " idempotent defaults: %s", what)
        config["enable_idempotence"] = False
        return
    version = config["api_version"]
    if version is not None and version < (0, 11):  # None: the broker's, learned at connect
        if asked:
            raise KafkaConfigurationError(
                "Idempotent/Transactional producer requires broker >= 0.11 (got api_version=%s)"
                % (version,))
        log.warning("Idempotence will be disabled because broker api_version %s < (0, 11)",
                    version)
        config["enable_idempotence"] = False


def _check_delivery_timeout(config, user):
    """Java: delivery.timeout.ms >= linger.ms + request.timeout.ms (raise only if user-set)."""
    floor = config["linger_ms"] + config["request_timeout_ms"]
    if config["delivery_timeout_ms"] < floor:
        if "delivery_timeout_ms" in user:
            raise KafkaConfigurationError(
                "delivery_timeout_ms must be >= linger_ms + request_timeout_ms (%d)" % floor)
        config["delivery_timeout_ms"] = floor
