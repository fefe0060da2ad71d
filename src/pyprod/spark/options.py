"""Spark sink options -> (topic, pyprod producer configs).

Like Spark's built-in Kafka sink: ``topic`` and ``kafka.<Java producer config>`` (values are
strings, as Spark passes them). ``kafka.linger.ms`` becomes ``linger_ms=5`` through
:func:`pyprod.config.from_java_names`; values are converted to the type of pyprod's default.
Anything else is rejected with a KafkaConfigurationError naming the option.

Exactly-once writes (:mod:`pyprod.spark.transactions`): ``exactlyOnce`` ("true"/"false",
default false: at-least-once, as Spark's sink) and ``transactionalIdPrefix`` (default
"pyprod-spark"). Their names match ignoring case, '_', '.' and '-' (``exactly_once``,
``transactional.id.prefix`` work too). With exactlyOnce, ``kafka.transaction.timeout.ms``
defaults to 900000 (15 min, the broker's default transaction.max.timeout.ms); the producer
configs are checked as a transactional producer's. ``kafka.transactional.id`` is refused: each
task needs its own id.

Security options that do not map by name (``kafka.sasl.jaas.config``, truststores and
keystores, ``kafka.ssl.endpoint.identification.algorithm``) go through
:mod:`pyprod.spark.security`. No message shows the value of an option holding a secret.
"""
from collections import namedtuple

from pyprod import config as configuration
from pyprod.errors import KafkaConfigurationError
from pyprod.spark import security, stores

PREFIX = "kafka."

EXACTLY_ONCE = "exactlyOnce"
TRANSACTIONAL_ID_PREFIX = "transactionalIdPrefix"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "pyprod-spark"
# the broker's default transaction.max.timeout.ms: the longest a transaction may stay open
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 900000
_SINK_OPTIONS = {"exactlyonce": EXACTLY_ONCE, "transactionalidprefix": TRANSACTIONAL_ID_PREFIX}

SinkOptions = namedtuple("SinkOptions", "topic configs exactly_once transactional_id_prefix "
                                        "checkpoint_location")
SinkOptions.__doc__ = """The sink's options, parsed: topic (or None), producer configs,
exactly_once, transactional_id_prefix (None unless exactly_once), checkpoint_location (the
streaming query's 'checkpointLocation' option, or None)."""

# Options Spark itself adds to every streaming sink's options; not ours to judge.
SPARK_STREAMING_OPTIONS = ("checkpointlocation", "path", "queryname")

# Configs taking Python objects (serializers, partitioners, contexts): not settable as text.
_OBJECT_CONFIGS = frozenset((
    "key_serializer", "value_serializer", "partitioner", "ssl_context", "selector",
    "sasl_oauth_token_provider", "kafka_client", "socket_options", "metric_reporters",
    "bootstrap_topics_filter"))
# Configs whose default is None but whose value is a number.
_INT_CONFIGS = frozenset(("receive_buffer_bytes", "send_buffer_bytes"))
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _typed(key, text):
    """The string ``text`` of config ``key`` as the type pyprod expects."""
    default = configuration.DEFAULTS.get(key, configuration.LEGACY.get(key))
    if not isinstance(text, str):
        return text  # already typed (e.g. from Python code)
    if isinstance(default, bool):
        low = text.strip().lower()
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise KafkaConfigurationError("expected true or false")
    if key == "acks":
        return text.strip()  # 'all', '1', '0', '-1': checked by pyprod.config
    if key in _INT_CONFIGS or (isinstance(default, (int, float)) and default is not None):
        return configuration.number_from_text(text)
    return text


def producer_configs(java_props):
    """{'linger.ms': '5', ...} (Java names, string values) -> {'linger_ms': 5, ...}, checked."""
    return check(_from_java(java_props))


def _from_java(java_props):
    props = dict(java_props)
    derived, sources = security.extract(props)
    out = {}
    for name, text in props.items():
        if name in ("key.serializer", "value.serializer"):
            raise KafkaConfigurationError(
                "option %r is not supported: keys and values are sent as bytes (string "
                "columns as UTF-8); cast the columns instead" % (PREFIX + name,))
        try:
            [(key, _)] = configuration.from_java_names({name: text}).items()
        except KafkaConfigurationError:
            raise KafkaConfigurationError(
                "option %r: %r is not a producer config pyprod knows" % (PREFIX + name, name)
            ) from None
        if key in _OBJECT_CONFIGS:
            raise KafkaConfigurationError(
                "option %r takes a Python object and cannot be set as a Spark option"
                % (PREFIX + name,))
        try:
            out[key] = _typed(key, text)
        except KafkaConfigurationError as e:
            shown = "" if security.is_secret(name) else ", got %r" % (text,)
            raise KafkaConfigurationError(
                "option %r: %s%s" % (PREFIX + name, e.args[0], shown)) from None
    return security.merge(out, derived, sources, lambda key: PREFIX + key.replace("_", "."))


def python_configs(producer_config):
    """publish()'s keyword arguments, checked: pyprod's keys, and Spark's option names for
    what has no pyprod key (any name with a dot, 'kafka.' optional, such as
    ``**{"kafka.sasl.jaas.config": ...}``)."""
    plain, java = {}, {}
    for name, value in producer_config.items():
        if "." not in name:
            plain[name] = value
            continue
        low = name.lower()
        java[low[len(PREFIX):] if low.startswith(PREFIX) else low] = value
    out = dict(plain)
    for key, value in _from_java(java).items():
        if key in plain and plain[key] != value:
            raise KafkaConfigurationError(
                "%s is set twice (as %s and through a dotted option name)" % (key, key))
        out[key] = value
    return check(out, required="bootstrap_servers")


def check(configs, required="option 'kafka.bootstrap.servers'"):
    """Validate producer configs the way KafkaProducer will, without connecting."""
    if "bootstrap_servers" not in configs:
        raise KafkaConfigurationError(
            "%s is required (e.g. 'host1:9092,host2:9092')" % (required,))
    try:
        configuration.build(**stores.for_validation(configs))
    except KafkaConfigurationError as e:
        raise KafkaConfigurationError("bad producer config: %s" % (e.args[0],)) from None
    return configs


def _sink_option(low):
    """The canonical name of a sink option (``exactly_once`` -> exactlyOnce), or None."""
    return _SINK_OPTIONS.get(low.replace("_", "").replace(".", "").replace("-", ""))


def _flag(name, value):
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise KafkaConfigurationError("option %r: expected true or false, got %r" % (name, value))


def parse_sink(options, *, streaming=False):
    """Spark options (any mapping, keys compared case-insensitively) -> SinkOptions."""
    topic, java, sink, checkpoint = None, {}, {}, None
    for name, value in options.items():
        low = name.lower()
        canonical = _sink_option(low)
        if low == "topic":
            if not isinstance(value, str) or not value.strip():
                raise KafkaConfigurationError("option 'topic' must be a non-empty topic name")
            topic = value.strip()
        elif low.startswith(PREFIX) and len(low) > len(PREFIX):
            if low[len(PREFIX):] == "transactional.id":
                raise KafkaConfigurationError(
                    "option %r is not supported: every task needs a transactional id of its "
                    "own; set option %r to 'true' (and %r) for exactly-once writes"
                    % (name, EXACTLY_ONCE, TRANSACTIONAL_ID_PREFIX))
            java[low[len(PREFIX):]] = value
        elif canonical is not None:
            if canonical in sink:
                raise KafkaConfigurationError("option %r is set twice (as %r and %r)" % (
                    canonical, sink[canonical][0], name))
            sink[canonical] = (name, value)
        elif streaming and low in SPARK_STREAMING_OPTIONS:
            if low == "checkpointlocation":
                checkpoint = value
            continue
        else:
            raise KafkaConfigurationError(
                "unsupported option %r for format('pyprod'): the options are 'topic', "
                "'kafka.<producer config>' (e.g. 'kafka.bootstrap.servers', 'kafka.linger.ms'), "
                "%r and %r" % (name, EXACTLY_ONCE, TRANSACTIONAL_ID_PREFIX))
    exactly_once = _flag(*sink[EXACTLY_ONCE]) if EXACTLY_ONCE in sink else False
    prefix = None
    if TRANSACTIONAL_ID_PREFIX in sink:
        name, prefix = sink[TRANSACTIONAL_ID_PREFIX]
        if not exactly_once:
            raise KafkaConfigurationError(
                "option %r needs option %r set to 'true'" % (name, EXACTLY_ONCE))
        if not isinstance(prefix, str) or not prefix.strip():
            raise KafkaConfigurationError("option %r must be a non-empty string" % (name,))
        prefix = prefix.strip()
    if not exactly_once:
        return SinkOptions(topic, producer_configs(java), False, None, checkpoint)
    configs = _from_java(java)
    configs.setdefault("transaction_timeout_ms", EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS)
    prefix = prefix or DEFAULT_TRANSACTIONAL_ID_PREFIX
    try:  # checked as the tasks' transactional producers will be
        check(dict(configs, transactional_id=prefix + "-0"))
    except KafkaConfigurationError as e:
        raise KafkaConfigurationError(
            "option %r: %s (transactions need idempotence: acks=all, retries > 0, at most 5 "
            "requests in flight)" % (EXACTLY_ONCE, e.args[0])) from None
    return SinkOptions(topic, configs, True, prefix, checkpoint)


def parse(options, *, streaming=False):
    """Spark options (any mapping, keys compared case-insensitively) -> (topic or None,
    producer configs)."""
    parsed = parse_sink(options, streaming=streaming)
    return parsed.topic, parsed.configs
