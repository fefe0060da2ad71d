"""A broker connection's setup policy: ConnectionSetup (TCP connect, SOCKS5, the TLS handshake,
the reconnect backoff), which each kcore BrokerConnection holds as its ``setup``.

kcore's BrokerConnection is the connection (Java's KafkaChannel, its InFlightRequests and its
ClusterConnectionStates entry): it owns its state, socket, Channel, in-flight FIFO, attempts,
and changes them itself; one per node, across reconnects. ConnectionSetup decides how it is set
up and holds no connection: the ConnectionLifecycle (connection_lifecycle.py) calls
``connection.setup.connect(connection, ...)`` / ``finish_connect`` / ``handshake`` (no select()
here: NetworkPoll polls the sockets).
With TLS the socket is wrapped once TCP connects (Java's SslTransportLayer): the handshake runs
non-blocking in HANDSHAKING, then the connection's reads and writes go through the ssl object,
which releases the GIL while it encrypts; each batch buffer is handed to it uncopied.
"""
import errno
import math
import random
import socket
import ssl

from kcore import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED,  # noqa: F401
                   HANDSHAKING, MAX_DELAY_MS, READY, RECV_CHUNK, SETTING_UP, Channel, ssl_failure)
from kcore import BrokerConnection
from pyprod import errors
from pyprod.socks5 import Socks5Handshake


def decoded(what, fn, *args, **kwargs):
    """fn(*args, **kwargs) of a response decoder: whatever it raises but a KafkaError becomes a
    KafkaProtocolError (the original as __cause__), so that a malformed reply closes its
    connection like any other protocol error instead of escaping the I/O thread."""
    try:
        return fn(*args, **kwargs)
    except errors.KafkaError:
        raise
    except Exception as e:  # noqa: BLE001 - any decoder bug or hostile input
        raise errors.KafkaProtocolError("cannot decode %s: %s: %s" % (
            what, type(e).__name__, e)) from e


class _SslCalls:
    """read(n, buffer) and write(data) through an SSLSocket's public methods, where it has no
    _sslobj (another Python than CPython)."""
    __slots__ = ("_sock",)

    def __init__(self, sock):
        self._sock = sock

    def read(self, n, buffer):
        return self._sock.recv_into(buffer, n)

    def write(self, data):
        return self._sock.send(data)


class ExponentialBackoff:
    """Java's ExponentialBackoff: initial * 2**attempts, capped at max, then +/- jitter."""
    __slots__ = ("initial", "maximum", "jitter", "_exp_max")

    def __init__(self, initial, maximum, jitter=0.2):
        self.initial = max(0, initial)
        self.maximum = max(self.initial, maximum)
        self.jitter = jitter
        self._exp_max = (math.log(self.maximum / max(self.initial, 1), 2)
                         if self.maximum > self.initial else 0)

    def backoff(self, attempts):
        if self._exp_max == 0:
            return self.initial
        term = self.initial * 2 ** min(attempts, self._exp_max)
        if self.jitter > 0:
            term *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return min(int(term), self.maximum)


class SetupTimeout:
    """kafka-python 3's socket_connection_setup_timeout_ms: a connection's setup (TCP connect,
    proxy, TLS, ApiVersions) gets ``initial`` ms; after n failed attempts in a row,
    initial * 2**(n-1) ms with +/-20% jitter, at most ``maximum``."""
    __slots__ = ("_backoff",)

    def __init__(self, initial, maximum):
        self._backoff = ExponentialBackoff(initial, maximum)

    def __call__(self, failed_attempts):
        if failed_attempts == 0:
            return self._backoff.initial
        return self._backoff.backoff(failed_attempts - 1)


def connection_settings(config):
    """What each ConnectionSetup reads from the producer config, past the socket options."""
    return dict(proxy=config["proxy"], setup_timeout=SetupTimeout(
        config["socket_connection_setup_timeout_ms"],
        config["socket_connection_setup_timeout_max_ms"]))


def socket_options(socket_options=(), send_buffer_bytes=None, receive_buffer_bytes=None):
    """kafka-python's socket settings as one list of setsockopt() arguments."""
    options = list(socket_options or ())
    if send_buffer_bytes:
        options.append((socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes))
    if receive_buffer_bytes:
        options.append((socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes))
    return options


def new_connection(node_id, host, port, *, receive_message_max_bytes=100_000_000, **setup):
    """A kcore BrokerConnection to node_id at host:port, set up by a ConnectionSetup(**setup)."""
    return BrokerConnection(node_id, host, port, Channel(
        int(receive_message_max_bytes), "node %s (%s:%s)" % (node_id, host, port)),
        ConnectionSetup(**setup))


class ConnectionSetup:
    """How one broker connection is set up, and when it may try again; every method takes the
    kcore BrokerConnection it acts on (which changes its own fields)."""

    def __init__(self, *, backoff=None, ssl_context=None, socket_options=(), proxy=None,
                 setup_timeout=None):
        """proxy: a Socks5Proxy to connect through; setup_timeout(failed_attempts): the setup
        deadline in ms (None: the timeout connect() is given)."""
        self._socket_options = socket_options
        self.reconnect_backoff_ms = 0
        self._backoff = backoff or ExponentialBackoff(50, 30000)  # kafka-python's defaults
        self._addrs = []
        self._ssl_context = ssl_context
        self._proxy = proxy
        self._setup_timeout = setup_timeout
        self._tunnel = None                  # the Socks5Handshake while it runs
        self._target = None                  # what the tunnel connects to: (host, port)
        self.authenticator = None            # SaslClientAuthenticator while one runs

    # -- state --

    def can_connect(self, connection, now):
        return (connection.state == DISCONNECTED
                and now - connection.last_attempt_ms >= self.reconnect_backoff_ms)

    def connection_delay(self, connection, now):
        """Remaining reconnect backoff if disconnected, MAX while connecting, else 0."""
        if connection.state == DISCONNECTED:
            return max(connection.last_attempt_ms + self.reconnect_backoff_ms - now, 0)
        if connection.state == READY:
            return 0
        return MAX_DELAY_MS

    # -- connecting --

    def connect(self, connection, now, timeout_ms):
        """Start a non-blocking connect. Raises KafkaConnectionError if it fails at once."""
        if self._setup_timeout is not None:
            timeout_ms = self._setup_timeout(connection.failed_attempts)
        connection.start_connect(now, now + timeout_ms)  # (IllegalStateError unless DISCONNECTED)
        host, port = connection.host, connection.port
        if not (isinstance(port, int) and 0 < port < 65536):  # getaddrinfo wraps it
            raise errors.KafkaConnectionError("cannot connect to %r:%r: port out of range" % (
                host, port))
        try:
            family, stype, proto, _, addr = self._next_address(host, port)
            sock = socket.socket(family, stype, proto)
        except (OSError, UnicodeError, ValueError, TypeError) as e:
            # a host name IDNA cannot encode (label too long or empty) raises UnicodeError
            raise errors.KafkaConnectionError(
                "cannot resolve/open %r:%s: %s" % (host, port, e)) from None
        connection.use_socket(sock)
        try:
            sock.setblocking(False)
            for option in self._socket_options:
                sock.setsockopt(*option)
            rc = sock.connect_ex(addr)
        except OSError as e:
            raise errors.KafkaConnectionError(
                "connect to %s failed: %s" % (self._peer(connection), e)) from None
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY,
                      getattr(errno, "WSAEWOULDBLOCK", -1)):
            raise errors.KafkaConnectionError("connect to %s failed: %s" % (
                self._peer(connection), errno.errorcode.get(rc, rc)))

    def _next_address(self, host, port):
        """The addrinfo to connect the socket to: the broker's next address (each in turn:
        client_dns_lookup=use_all_dns_ips), or the proxy's, and then the tunnel's target."""
        if self._proxy is not None and self._proxy.remote_dns:
            self._target = (host, port)
            return self._proxy.address()
        if not self._addrs:
            self._addrs = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        info = self._addrs.pop(0)
        if self._proxy is None:
            return info
        self._target = (info[4][0], port)
        return self._proxy.address()

    def finish_connect(self, connection, now):
        """The socket became writable while CONNECTING: raise if the connect failed."""
        err = connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise errors.KafkaConnectionError("connect to %s failed: %s" % (
                self._peer(connection), errno.errorcode.get(err, err)))
        connection.touch(now)
        if self._proxy is not None:  # the SOCKS5 exchange first, in HANDSHAKING
            self._tunnel = Socks5Handshake(self._proxy, *self._target)
            connection.start_handshake()
        else:
            self._transport_ready(connection, now)

    def _peer(self, connection):
        peer = "%s:%s" % (connection.host, connection.port)
        if self._proxy is None:
            return peer
        return "%s through SOCKS5 proxy %s:%s" % (peer, self._proxy.host, self._proxy.port)

    def _transport_ready(self, connection, now):
        """TCP (and the tunnel, if any) is up: plaintext goes to ApiVersions, TLS wraps the
        socket and starts its handshake."""
        if self._ssl_context is None:
            connection.transport_ready(now)
            return
        try:  # same descriptor, so the selector registration stays valid
            sock = self._ssl_context.wrap_socket(
                connection.sock, server_hostname=connection.host, do_handshake_on_connect=False)
            connection.use_socket(sock)
            # the ssl object's C half: read()/write() without ssl.py's Python wrappers
            tls = getattr(sock, "_sslobj", None) or _SslCalls(sock)
        except (OSError, ValueError) as e:
            raise ssl_failure(e, connection.node_id, connection.host, connection.port,
                              "setup") from e
        connection.start_handshake(tls, RECV_CHUNK)

    def handshake(self, connection, now):
        """One non-blocking step of the SOCKS5 exchange, then of the TLS handshake; True once
        both are done (the connection is CHECKING_API_VERSIONS)."""
        if self._tunnel is not None:
            try:
                if not self._tunnel.step(connection.sock):
                    connection.handshake_waits(self._tunnel.wants_write)
                    return False
            except OSError as e:
                raise errors.KafkaConnectionError("SOCKS5 exchange with %s failed: %s" % (
                    self._peer(connection), e)) from None
            self._tunnel = None
            connection.touch(now)
            self._transport_ready(connection, now)
            if self._ssl_context is None:
                return True
        try:
            connection.sock.do_handshake()
        except ssl.SSLWantReadError:
            connection.handshake_waits(False)
            return False
        except ssl.SSLWantWriteError:
            connection.handshake_waits(True)
            return False
        except OSError as e:
            raise ssl_failure(e, connection.node_id, connection.host, connection.port,
                              "handshake") from e
        connection.transport_ready(now)
        return True

    def handshake_summary(self, connection):
        """What handshake() finished, for the log."""
        done = [] if self._proxy is None else ["SOCKS5 tunnel through %s:%s open" % (
            self._proxy.host, self._proxy.port)]
        if self._ssl_context is not None:
            done.append("TLS handshake done (%s)" % connection.sock.version())
        return ", ".join(done)

    def readdress(self, connection, host, port):
        """The broker moved: the next attempt goes to host:port, resolved afresh."""
        connection.readdress(host, port)
        self._addrs = []

    def closed(self, connection, was_open):
        """connection closed (was_open: it was not DISCONNECTED before): the setup in progress
        ends, and a failed attempt starts the reconnect backoff."""
        if was_open:
            self.reconnect_backoff_ms = self._backoff.backoff(connection.failed_attempts - 1)
        self.authenticator = None
        self._tunnel = None
