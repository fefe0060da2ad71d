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
    assert config.build()["batch_max_size"] == 256 * 1024
    assert config.build(batch_size=512 * 1024)["batch_max_size"] == 512 * 1024
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


@pytest.mark.parametrize("key", ["proxy_url", "socks5_proxy"])
def test_a_proxy_is_refused_not_ignored(key):
    """No proxy support yet: a program that sets one must not connect straight to the brokers
    without being told."""
    assert config.build()[key] is None
    with pytest.raises(KafkaConfigurationError, match="%s: connecting through a proxy" % key):
        config.build(**{key: "socks5://127.0.0.1:1080"})
