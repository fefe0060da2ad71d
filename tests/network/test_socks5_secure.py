"""TLS and SASL on top of a SOCKS5 tunnel: SASL_SSL (SCRAM) to the secured broker through the
harness proxy with a login, read back over its plaintext listener. The tunnel and the TLS
handshake are pyprod's Python (connection.py, socks5.py), the same over both kcore twins: the
pure-twin pass skips it rather than start the secured broker a second time."""
import pytest

import kcore
from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all
from tests.harness.socks5_proxy import Socks5Server

pytestmark = pytest.mark.skipif(not kcore.EXTENSIONS,
                                reason="pure twins: same Python path as the compiled pass")


def test_sasl_ssl_through_the_proxy(kafka_secure, topic):
    name = topic(2, cluster=kafka_secure)
    sent = [Sent(b"k%d" % i, b"v%d" % i) for i in range(200)]
    config = kafka_secure.client_config("SASL_SSL", mechanism="SCRAM-SHA-256")
    with Socks5Server("carol", "c4r0l-proxy") as proxy:
        with KafkaProducer(proxy_url=proxy.url("socks5", "carol", "c4r0l-proxy"),
                           **config) as p:
            for s in sent:
                p.send(name, value=s.value, key=s.key)
            p.flush()
            connections = [c for c in list(p._client.network_poll.connections.values())
                           if c.sock is not None]
            assert connections and all(c.sock.version() for c in connections)  # TLS in the tunnel
            assert {c.sock.getpeername()[1] for c in connections} == {proxy.port}
        assert proxy.logins and all(ok for _, ok in proxy.logins)
    compare(sent, read_all(kafka_secure.bootstrap_servers, name, expected_count=len(sent)))
