import pytest

from pyprod import config
from pyprod.errors import KafkaConfigurationError


def test_defaults_match_kafka_python():
    from kafka import KafkaProducer as KP

    ours = config.build()
    for key, value in KP.DEFAULT_CONFIG.items():
        if key in ("partitioner", "kafka_client", "selector", "client_id", "socket_options"):
            continue
        assert key in ours, key
        assert ours[key] == value, key


@pytest.mark.parametrize("acks,expected", [(0, 0), (1, 1), ("all", -1), (-1, -1)])
def test_acks(acks, expected):
    assert config.build(acks=acks, enable_idempotence=False)["acks"] == expected


@pytest.mark.parametrize("bad", [{"acks": 2}, {"acks": True}, {"compression_type": "brotli"},
                                 {"batch_size": -1}, {"linger_ms": "5"}, {"buffer_memory": 0},
                                 {"no_such_key": 1}, {"security_protocol": "TLS"},
                                 {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"},
                                 {"bootstrap_servers": "host:notaport"},
                                 {"bootstrap_servers": []}])
def test_bad_configs_raise(bad):
    with pytest.raises(KafkaConfigurationError):
        config.build(**bad)


def test_idempotence_conflicts_follow_kafka_python():
    with pytest.raises(KafkaConfigurationError):
        config.build(enable_idempotence=True, acks=1)
    assert config.build(acks=1)["enable_idempotence"] is False
    assert config.build()["enable_idempotence"] is True


def test_legacy_and_java_names():
    assert config.build(buffer_memory=1 << 20, api_version_auto_timeout_ms=5)["buffer_memory"] == 1 << 20
    assert config.from_java_names({"linger.ms": 5, "batch.size": 10}) == {"linger_ms": 5, "batch_size": 10}
    with pytest.raises(KafkaConfigurationError):
        config.from_java_names({"no.such.key": 1})


def test_bootstrap_parsing():
    assert config.parse_bootstrap("a:1,b") == [("a", 1), ("b", 9092)]
    assert config.parse_bootstrap(["[::1]:9093"]) == [("::1", 9093)]


def test_delivery_timeout_floor():
    assert config.build(linger_ms=10, request_timeout_ms=200000)["delivery_timeout_ms"] == 200010
    with pytest.raises(KafkaConfigurationError):
        config.build(delivery_timeout_ms=10)


def test_batch_max_size():
    assert config.DEFAULTS["batch_max_size"] is None  # resolved by build()
    # below message.max.bytes' smallest default (1,000,012 bytes before Kafka 1.1)
    assert config.build()["batch_max_size"] == 960 * 1024 < 1_000_012
    assert config.build(batch_size=1000 * 1024)["batch_max_size"] == 1000 * 1024
    assert config.build(batch_max_size=100)["batch_max_size"] == 16384  # >= batch_size
    assert config.build(batch_max_size=65536)["batch_max_size"] == 65536
    # never above max_request_size
    assert config.build(max_request_size=100_000)["batch_max_size"] == 100_000
    assert config.build(batch_max_size=4 << 20)["batch_max_size"] == 1048576
    java = config.from_java_names({"batch.max.size": 32768, "batch.size": 8192})
    assert java == {"batch_max_size": 32768, "batch_size": 8192}
    assert config.build(**java)["batch_max_size"] == 32768
    for bad in (0, -1, 1.5, "1000", True):
        with pytest.raises(KafkaConfigurationError):
            config.build(batch_max_size=bad)


def test_idempotence_conflicts_warn_when_they_turn_it_off(caplog):
    with caplog.at_level("WARNING", logger="pyprod.config"):
        built = config.build(retries=0, max_in_flight_requests_per_connection=6)
    assert built["enable_idempotence"] is False
    assert "retries=0" in caplog.text and "max_in_flight_requests_per_connection=6" in caplog.text
    with pytest.raises(KafkaConfigurationError, match="incompatible with user-provided retries=0"):
        config.build(enable_idempotence=True, retries=0)
    # not user-set: the defaults never conflict; non-conflicting user values keep it on
    assert config.build(acks="all", retries=3, max_in_flight_requests_per_connection=5)[
        "enable_idempotence"] is True
    # turned off by the user: nothing to check, nothing conflicts
    assert config.build(enable_idempotence=False, acks=0)["acks"] == 0


def test_transactional_id_forces_idempotence():
    built = config.build(transactional_id="tx-1")
    assert built["transactional_id"] == "tx-1"
    assert built["enable_idempotence"] is True and built["acks"] == -1
    assert config.build(transactional_id="tx-1", enable_idempotence=True)["enable_idempotence"]
    with pytest.raises(KafkaConfigurationError,
                       match=r"Cannot set transactional_id without enable_idempotence\.$"):
        config.build(transactional_id="tx-1", enable_idempotence=False)


@pytest.mark.parametrize("conflict", [{"acks": 1}, {"acks": 0}, {"retries": 0},
                                      {"max_in_flight_requests_per_connection": 6}])
def test_transactional_id_makes_conflicts_strict(conflict):
    """Without transactional_id the same configs quietly turn idempotence off; with it they
    raise, even though enable_idempotence was not set (kafka-python 3.x)."""
    assert config.build(**conflict)["enable_idempotence"] is False
    with pytest.raises(KafkaConfigurationError, match="incompatible with user-provided"):
        config.build(transactional_id="tx-1", **conflict)


@pytest.mark.parametrize("bad", ["", b"tx", 1, ["tx"]])
def test_transactional_id_must_be_a_non_empty_str(bad):
    with pytest.raises(KafkaConfigurationError, match="transactional_id must be a non-empty str"):
        config.build(transactional_id=bad)


def test_transaction_timeout_ms():
    assert config.build()["transaction_timeout_ms"] == 60000
    assert config.build(transaction_timeout_ms=1)["transaction_timeout_ms"] == 1
    assert config.build(transactional_id="t", transaction_timeout_ms=900000)[
        "transaction_timeout_ms"] == 900000
    for bad in (0, -1, 1.5, 60000.0, "60000", True, None, 1 << 31):
        with pytest.raises(KafkaConfigurationError, match="transaction_timeout_ms"):
            config.build(transaction_timeout_ms=bad)
    java = config.from_java_names({"transactional.id": "t", "transaction.timeout.ms": 5000})
    assert config.build(**java)["transaction_timeout_ms"] == 5000


@pytest.mark.parametrize("version", [(0, 10, 2), "0.10.2", [0, 10, 2], (0, 9), (0, 8, 2)])
def test_an_old_api_version_turns_idempotence_off(version, caplog):
    """A broker older than 0.11 has no idempotence: off with a warning if the user did not ask
    for it, else KafkaConfigurationError (as kafka-python 3.x)."""
    with caplog.at_level("WARNING", logger="pyprod.config"):
        built = config.build(api_version=version)
    assert built["enable_idempotence"] is False
    assert "< (0, 11)" in caplog.text
    for asked in ({"enable_idempotence": True}, {"transactional_id": "tx-1"}):
        with pytest.raises(KafkaConfigurationError, match="requires broker >= 0.11"):
            config.build(api_version=version, **asked)


@pytest.mark.parametrize("version,expected", [
    (None, None), ("auto", None), ((0, 11), (0, 11)), ("0.11.0", (0, 11, 0)), ((4, 0), (4, 0)),
    ("2.8", (2, 8)), ([3, 9], (3, 9))])
def test_api_version_normalised_and_new_enough(version, expected):
    built = config.build(api_version=version, transactional_id="tx-1")
    assert built["api_version"] == expected
    assert built["enable_idempotence"] is True


@pytest.mark.parametrize("bad", [11, 0.11, (), (0, "11"), (0, 11.0), (True,), {"v": 1}])
def test_api_version_must_be_a_tuple_of_ints(bad):
    with pytest.raises(KafkaConfigurationError, match="api_version must be None or a tuple"):
        config.build(api_version=bad)
    with pytest.raises(ValueError):  # a malformed 2.x string, as kafka-python
        config.build(api_version="0.x")


def test_api_version_conflict_order_follows_kafka_python():
    """A config conflict is reported (or turns idempotence off) before the broker version
    is looked at, as kafka-python checks them."""
    with pytest.raises(KafkaConfigurationError, match="incompatible with user-provided acks=1"):
        config.build(api_version=(0, 10), enable_idempotence=True, acks=1)
    assert config.build(api_version=(0, 10), acks=1)["enable_idempotence"] is False


@pytest.mark.parametrize("configs", [
    {}, {"enable_idempotence": True}, {"enable_idempotence": False}, {"acks": 1},
    {"acks": 1, "enable_idempotence": True}, {"acks": 0, "enable_idempotence": False},
    {"retries": 0}, {"max_in_flight_requests_per_connection": 6},
    {"transactional_id": "t"}, {"transactional_id": "t", "enable_idempotence": False},
    {"transactional_id": "t", "acks": 1}, {"transactional_id": "t", "retries": 0},
    {"transactional_id": "t", "enable_idempotence": True, "acks": "all"},
    {"api_version": (0, 10, 2)}, {"api_version": (0, 10, 2), "enable_idempotence": True},
    {"api_version": (0, 10, 2), "transactional_id": "t"}, {"api_version": (0, 11)},
    {"api_version": (0, 10, 2), "acks": 1},
])
def test_idempotence_rules_match_kafka_python(configs):
    """The same outcome (enable_idempotence, or an error) as kafka-python's own constructor,
    which is given the api_version so it never connects."""
    from kafka import KafkaProducer as KP
    from kafka.errors import KafkaConfigurationError as KPError

    theirs_cfg = dict(configs, bootstrap_servers="127.0.0.1:1")
    theirs_cfg.setdefault("api_version", (4, 0))
    try:
        kp = KP(**theirs_cfg)
    except KPError as e:
        theirs = ("error", str(e))
    else:
        theirs = kp.config["enable_idempotence"]
        kp.close(timeout=0)
    try:
        ours = config.build(**theirs_cfg)["enable_idempotence"]
    except KafkaConfigurationError as e:
        ours = ("error", str(e))
    assert ours == theirs
