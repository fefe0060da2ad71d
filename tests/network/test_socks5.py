"""proxy_url / socks5_proxy: pyprod's SOCKS5 client (pyprod/socks5.py, run by connection.py)
against the tiny SOCKS5 proxy of tests/harness/socks5_proxy.py: the handshake on its own (no
auth, username/password, byte-by-byte replies, each refusal), a connection's setup timeout, and
round trips to the real broker through the proxy (plaintext; SASL_SSL in
test_socks5_secure.py). The proxy password never shows in logs or errors."""
import logging
import select
import socket
import threading
import time

import pytest

from pyprod import KafkaProducer, errors
from pyprod.errors import ProxyAuthenticationError
from pyprod.socks5 import Socks5Handshake, Socks5Proxy
from tests.harness.readback import Sent, compare, read_all
from tests.harness.socks5_proxy import Socks5Server
from tests.network.test_network_client import make_client, poll_until

SECRET = "pr0xy-s3cret"
WAIT = 10.0


@pytest.fixture
def echo():
    """A TCP echo server on 127.0.0.1: (host, port)."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                peer, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=peer: [c.sendall(d) for d in iter(
                lambda: c.recv(4096), b"")], daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()
    srv.close()


def tunnel(url, host, port):
    """A socket through the proxy at url to host:port, driving Socks5Handshake as a
    connection does (non-blocking, waiting for what it wants)."""
    proxy = Socks5Proxy(url)
    sock = socket.create_connection(proxy.address()[4], timeout=WAIT)
    sock.setblocking(False)
    hs = Socks5Handshake(proxy, host, port)
    deadline = time.monotonic() + WAIT
    try:
        while not hs.step(sock):
            assert time.monotonic() < deadline, "SOCKS5 handshake stalled"
            r, w = ([], [sock]) if hs.wants_write else ([sock], [])
            select.select(r, w, [], 0.5)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(True)
    return sock


@pytest.mark.parametrize("scheme,host,auth,drip", [
    ("socks5", "127.0.0.1", False, False), ("socks5h", "localhost", False, True),
    ("socks5", "127.0.0.1", True, True), ("socks5h", "127.0.0.1", True, False)])
def test_the_handshake_opens_a_tunnel(echo, scheme, host, auth, drip):
    user = ("bob", SECRET) if auth else (None, None)
    with Socks5Server(*user, drip=drip) as proxy:
        sock = tunnel(proxy.url(scheme, *user), host, echo[1])
        with sock:
            sock.sendall(b"hello")
            assert sock.recv(5) == b"hello"  # no byte of the handshake left over
        atyp = 3 if host == "localhost" else 1
        assert proxy.targets == [(atyp, host, echo[1])]
        assert proxy.logins == ([("bob", True)] if auth else [])


def test_refusals(echo):
    with Socks5Server("bob", SECRET) as proxy:
        with pytest.raises(ProxyAuthenticationError, match="refused user 'bob'") as e:
            tunnel(proxy.url("socks5", "bob", "wrong-" + SECRET), "127.0.0.1", echo[1])
        assert SECRET not in str(e.value) and not e.value.retriable
        with pytest.raises(ProxyAuthenticationError, match="requires authentication"):
            tunnel(proxy.url("socks5"), "127.0.0.1", echo[1])
    with Socks5Server() as proxy:
        closed = socket.create_server(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        with pytest.raises(errors.KafkaConnectionError, match="connection refused .reply 5."):
            tunnel(proxy.url("socks5"), "127.0.0.1", port)
    with Socks5Server(reply=2) as proxy:
        with pytest.raises(errors.KafkaConnectionError, match="not allowed by ruleset"):
            tunnel(proxy.url("socks5h"), "localhost", echo[1])


def test_a_hung_proxy_ends_at_the_connection_setup_timeout():
    """socket_connection_setup_timeout_ms bounds the SOCKS5 exchange too; the next attempt
    goes through the proxy again."""
    with Socks5Server(hang=True) as proxy, make_client(
            "127.0.0.1:9", proxy_url=proxy.url(), socket_connection_setup_timeout_ms=200,
            socket_connection_setup_timeout_max_ms=200, reconnect_backoff_ms=10) as (nc, _):
        start = time.monotonic()
        nc.ready(-1, int(start * 1000))
        connection = nc.connection(-1)
        poll_until(nc, lambda: connection.error is not None, "the setup timeout", poll_ms=20)
        assert "timed out" in str(connection.error) and connection.failed_attempts == 1
        assert time.monotonic() - start < 3
        poll_until(nc, lambda: proxy.clients >= 2 or nc.ready(-1, int(time.monotonic() * 1000)),
                   "a second attempt", poll_ms=20)


def _round_trip(kafka, topic, proxy, url, n=500, **configs):
    name = topic(3)
    sent = [Sent(b"k%d" % (i % 7), b"v%d" % i) for i in range(n)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, proxy_url=url, linger_ms=5,
                       **configs) as p:
        futures = [p.send(name, value=s.value, key=s.key) for s in sent]
        p.flush()
        for f in futures:
            f.get(timeout=WAIT)
        peers = {c.sock.getpeername()[1] for c in list(p._client.network_poll.connections.values())
                 if c.sock is not None}
    assert peers == {proxy.port}  # every connection went through the proxy
    compare(sent, read_all(kafka.bootstrap_servers, name, expected_count=n))
    broker_port = int(kafka.bootstrap_servers.rsplit(":", 1)[1])
    assert broker_port in {port for _, _, port in proxy.targets}


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_round_trip_through_the_proxy(kafka, topic, scheme):
    with Socks5Server() as proxy:
        _round_trip(kafka, topic, proxy, proxy.url(scheme))


def test_round_trip_with_a_proxy_login_and_2x_socks5_proxy(kafka, topic, caplog):
    with Socks5Server("bob", SECRET) as proxy, caplog.at_level(logging.DEBUG):
        name = topic(1)
        with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                           socks5_proxy=proxy.url("socks5", "bob", SECRET)) as p:
            p.send(name, b"through the proxy").get(timeout=WAIT)
            assert SECRET not in repr(p.config) and SECRET not in repr(p.metrics())
        assert proxy.logins and all(ok for _, ok in proxy.logins)
    assert SECRET not in caplog.text and "socks5_proxy is deprecated" in caplog.text
    assert [r.value for r in read_all(kafka.bootstrap_servers, name, expected_count=1)] == [
        b"through the proxy"]


def test_a_refused_proxy_login_fails_the_producer_fast(kafka, caplog):
    with Socks5Server("bob", SECRET) as proxy, caplog.at_level(logging.DEBUG):
        start = time.monotonic()
        with pytest.raises(errors.AuthenticationFailedError, match="refused user 'bob'") as e:
            KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                          proxy_url=proxy.url("socks5h", "bob", "not-" + SECRET),
                          bootstrap_timeout_ms=20000)
        assert time.monotonic() - start < 10  # not the whole bootstrap_timeout_ms
    assert isinstance(e.value, errors.KafkaConnectionError)
    assert SECRET not in str(e.value) and SECRET not in caplog.text
