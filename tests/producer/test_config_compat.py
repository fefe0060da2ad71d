"""Honest configuration: every key kafka-python 2.x or 3.x accepts works, is refused, or (for
kafka-python's own network internals) warns that it has no effect here; 3.x's connection keys
keep kafka-python's meaning (checked against its source, installed in .venv)."""
import logging
import pathlib
import random
import re
import selectors
import socket

import pytest

from pyprod import config
from pyprod.connection import SetupTimeout
from pyprod.errors import KafkaConfigurationError
from pyprod.socks5 import Socks5Proxy, redact

SRC = pathlib.Path(config.__file__).parent
SECRET = "pr0xy-s3cret"
# keys whose meaning config.build() applies itself (-> what it sets), and the one with nothing
# left to bound in pyprod (docs/configuration.md says so)
APPLIED_BY_BUILD = {"client_dns_lookup": "bootstrap", "proxy_url": "proxy",
                    "socks5_proxy": "proxy", "api_version_auto_timeout_ms": "bootstrap_timeout_ms",
                    "default_api_timeout_ms": None}


def test_every_key_is_read_applied_or_warns():
    """No key is accepted and then ignored in silence: each is read by the code, applied by
    build(), or listed in _NO_EFFECT (a warning when set)."""
    code = "\n".join(p.read_text() for p in SRC.rglob("*.py") if p.name != "config.py")
    keys = set(config.DEFAULTS) | set(config.LEGACY)
    unread = {k for k in keys if not re.search(r"""\[["']%s["']\]""" % k, code)}
    assert unread == set(config._NO_EFFECT) | set(APPLIED_BY_BUILD)


def test_kafka_python_3_connection_keys_and_defaults():
    from kafka.net.manager import KafkaConnectionManager as M

    built = config.build()
    for key in ("socket_connection_setup_timeout_ms", "socket_connection_setup_timeout_max_ms",
                "client_dns_lookup"):
        assert built[key] == M.DEFAULT_CONFIG[key], key
    assert built["default_api_timeout_ms"] == 60000  # kafka-python 3's newer producer's
    assert set(config.DNS_LOOKUPS) == set(M._VALID_DNS_LOOKUP_MODES)
    java = config.from_java_names({"socket.connection.setup.timeout.ms": 500,
                                   "default.api.timeout.ms": 90000, "client.dns.lookup":
                                   "use_all_dns_ips"})
    assert config.build(**java)["socket_connection_setup_timeout_ms"] == 500


def test_default_api_timeout_ms_is_at_least_request_timeout_ms():
    with pytest.raises(KafkaConfigurationError,
                       match=r"default_api_timeout_ms \(1000\) must be >= request_timeout_ms "
                             r"\(30000\)\."):
        config.build(default_api_timeout_ms=1000)
    # unset, it follows a larger request_timeout_ms (a 2.x program keeps running)
    assert config.build(request_timeout_ms=90000)["default_api_timeout_ms"] == 90000


@pytest.mark.parametrize("bad", [{"socket_connection_setup_timeout_ms": 0},
                                 {"socket_connection_setup_timeout_max_ms": "1"},
                                 {"socket_connection_setup_timeout_ms": 5000,
                                  "socket_connection_setup_timeout_max_ms": 100},
                                 {"metrics_num_samples": 0}, {"metrics_num_samples": 1.5},
                                 {"metrics_sample_window_ms": 0},
                                 {"metric_reporters": [object()]}, {"metric_reporters": "x"}])
def test_bad_values_raise(bad):
    with pytest.raises(KafkaConfigurationError):
        config.build(**bad)


def test_setup_timeout_grows_per_failure_as_kafka_pythons(monkeypatch):
    """The first attempt gets socket_connection_setup_timeout_ms; after n failures in a row,
    that * 2**(n-1) (kafka-python's _calculate_exp_timeout), at most the max, with jitter."""
    from kafka.net.manager import KafkaConnectionManager

    theirs = KafkaConnectionManager.__new__(KafkaConnectionManager)
    theirs.config = dict(socket_connection_setup_timeout_ms=10000,
                         socket_connection_setup_timeout_max_ms=30000)
    theirs.jitter_pct = lambda: 1.0
    monkeypatch.setattr(random, "uniform", lambda a, b: 1.0)
    ours = SetupTimeout(10000, 30000)
    assert ours(0) == 10000
    for failures in range(1, 6):
        assert ours(failures) == theirs._calculate_exp_timeout(
            "socket_connection_setup_timeout_ms", failures)
    monkeypatch.undo()
    assert all(8000 <= ours(1) <= 12000 and ours(5) <= 30000 for _ in range(50))


def test_client_dns_lookup(monkeypatch):
    with pytest.raises(KafkaConfigurationError, match="client_dns_lookup must be one of"):
        config.build(client_dns_lookup="default")

    def getaddrinfo(host, port, *args):
        if host == "nowhere":
            raise socket.gaierror("no such host")
        names = {"alias": ["b1.example", "b2.example"]}.get(host, [host])
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, n, ("10.0.0.%d" % i, port))
                for i, n in enumerate(names)]
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    built = config.build(bootstrap_servers="alias:9093,nowhere:9092",
                         client_dns_lookup="resolve_canonical_bootstrap_servers_only")
    assert built["bootstrap"] == [("b1.example", 9093), ("b2.example", 9093),
                                  ("nowhere", 9092)]
    assert config.build(bootstrap_servers="alias:9093")["bootstrap"] == [("alias", 9093)]


def test_proxy_urls():
    p = config.build(proxy_url="socks5h://bob:%s%%40x@127.0.0.1:1081" % SECRET)["proxy"]
    assert (p.scheme, p.host, p.port, p.username, p.remote_dns) == (
        "socks5h", "127.0.0.1", 1081, "bob", True)
    assert p.credentials() == b"\x01\x03bob\x0e" + (SECRET + "@x").encode()
    p = config.build(proxy_url="socks5://[::1]")["proxy"]
    assert (p.host, p.port, p.username, p.remote_dns, p.credentials()) == (
        "::1", 1080, None, False, None)
    assert config.build()["proxy"] is None


@pytest.mark.parametrize("url,message", [
    ("http://u:%s@h:3128" % SECRET, "Unsupported proxy url scheme: http"),
    ("u:%s@h:1080" % SECRET, r"proxy_url requires scheme:// \(u:\*\*\*@h:1080\)"),
    ("socks5://u:%s@h:99999" % SECRET, "Unable to parse proxy_url"),
    ("socks5://u@h", "give both a user name and a password"),
    ("socks5://:%s@h" % SECRET, "the user name must be 1 to 255 bytes"),
    ("socks5://u:%s@" % SECRET, "names no proxy host"),
    ("socks5://u:%s@h" % ("x" * 256), "the password must be 1 to 255 bytes"),
    (1080, "proxy_url must be a str")])
def test_bad_proxy_urls_are_refused_without_their_password(url, message):
    with pytest.raises(KafkaConfigurationError, match=message) as e:
        config.build(proxy_url=url)
    assert SECRET not in str(e.value) and "x" * 256 not in str(e.value)


def test_the_proxy_password_is_never_shown(caplog):
    url = "socks5://bob:%s@127.0.0.1:1080" % SECRET
    with caplog.at_level(logging.DEBUG):
        built = config.build(socks5_proxy=url, proxy_url=url.replace("1080", "1081"))
    for text in (repr(built), str(built), repr(built["proxy"]), caplog.text):
        assert SECRET not in text
    assert "'proxy_url': 'socks5://bob:***@127.0.0.1:1081'" in repr(built)
    assert redact("socks5://a:b:c@h") == "socks5://a:***@h"


def test_socks5_proxy_is_kafka_pythons_deprecated_alias(caplog):
    with caplog.at_level(logging.WARNING, logger="pyprod.config"):
        built = config.build(socks5_proxy="socks5://127.0.0.1:1080")
    assert built["proxy"].port == 1080
    assert "socks5_proxy is deprecated, use proxy_url instead" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pyprod.config"):
        built = config.build(socks5_proxy="socks5://127.0.0.1:1080",
                             proxy_url="socks5://127.0.0.1:1081")
    assert built["proxy"].port == 1081 and "is not used: proxy_url" in caplog.text
    assert repr(Socks5Proxy("socks5h://u:p@h:1", "x")) == "socks5h://u:***@h:1"


@pytest.mark.parametrize("key,value", [("selector", selectors.SelectSelector),
                                       ("kafka_client", object), ("sock_chunk_bytes", 8192),
                                       ("sock_chunk_buffer_count", 10),
                                       ("bootstrap_topics_filter", {"t"})])
def test_keys_of_kafka_pythons_network_layer_warn(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger="pyprod.config"):
        config.build(**{key: value})
        assert "%s=%r has no effect" % (key, value) in caplog.text
        caplog.clear()
        default = config.DEFAULTS.get(key, config.LEGACY.get(key))
        config.build(**{key: default})
    assert caplog.text == ""


def test_2x_programs_keep_running():
    built = config.build(buffer_memory=1 << 20, api_version_auto_timeout_ms=5000,
                         sock_chunk_bytes=4096, bootstrap_topics_filter=set())
    assert built["buffer_memory"] == 1 << 20 and built["bootstrap_timeout_ms"] == 5000


@pytest.mark.parametrize("version", [(2, 0), "2.0.1", (0, 10, 1)])
def test_zstd_with_an_api_version_before_2_1_is_refused_as_kafka_python_does(version):
    with pytest.raises(ValueError, match="Zstd Requires >= Kafka 2.1 Brokers"):
        config.build(compression_type="zstd", api_version=version)
    config.build(compression_type="zstd", api_version=(2, 1))
