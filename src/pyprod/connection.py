"""One broker connection: its setup (TCP connect, the TLS handshake), its reconnect backoff and
why it last closed, over kcore's Link (the data path: its state, socket, Channel, in-flight
FIFO and TLS byte stream, which kcore's NetworkPoll reads and writes).

Java splits this over KafkaChannel, ClusterConnectionStates and InFlightRequests; here one object
per node holds it all and lives across reconnects (it keeps the reconnect backoff). It does no
select(): NetworkPoll polls the sockets, and the NetworkClient calls connect / finish_connect /
handshake. With TLS the socket is wrapped once TCP connects (Java's SslTransportLayer): the
handshake runs non-blocking in HANDSHAKING, then the Link's reads and writes go through the ssl
object, which releases the GIL while it encrypts; each batch buffer is handed to it uncopied.
"""
import errno
import math
import random
import socket
import ssl

from kcore import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED,  # noqa: F401
                   HANDSHAKING, MAX_DELAY_MS, READY, RECV_CHUNK, SETTING_UP, Channel, Link,
                   ssl_failure)
from pyprod import errors
from pyprod.socks5 import Socks5Handshake

_NEVER = -(1 << 62)


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
    """What each BrokerConnection reads from the producer config, past the socket options."""
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


class BrokerConnection(Link):
    def __init__(self, node_id, host, port, *, backoff=None, ssl_context=None,
                 socket_options=(), receive_message_max_bytes=100_000_000, proxy=None,
                 setup_timeout=None):
        """proxy: a Socks5Proxy to connect through; setup_timeout(failed_attempts): the setup
        deadline in ms (None: the timeout connect() is given)."""
        super().__init__(node_id, host, port, Channel(
            int(receive_message_max_bytes), "node %s (%s:%s)" % (node_id, host, port)))
        self._socket_options = socket_options
        self.error = None                     # why it last closed
        self.failed_attempts = 0
        self.last_attempt_ms = _NEVER
        self.reconnect_backoff_ms = 0
        self._backoff = backoff or ExponentialBackoff(50, 30000)  # kafka-python's defaults
        self._addrs = []
        self._ssl_context = ssl_context
        self._proxy = proxy
        self._setup_timeout = setup_timeout
        self._tunnel = None                  # the Socks5Handshake while it runs
        self._target = None                  # what the tunnel connects to: (host, port)
        self.authenticator = None            # SaslClientAuthenticator while one runs

    def __repr__(self):
        return "<BrokerConnection node=%s %s:%s %s>" % (
            self.node_id, self.host, self.port, self.state)

    # -- state --

    def can_connect(self, now):
        return (self.state == DISCONNECTED
                and now - self.last_attempt_ms >= self.reconnect_backoff_ms)

    def connection_delay(self, now):
        """Remaining reconnect backoff if disconnected, MAX while connecting, else 0."""
        if self.state == DISCONNECTED:
            return max(self.last_attempt_ms + self.reconnect_backoff_ms - now, 0)
        if self.state == READY:
            return 0
        return MAX_DELAY_MS

    @property
    def is_connected(self):
        return self.state in (CHECKING_API_VERSIONS, AUTHENTICATING, READY)

    def fileno(self):
        return self.sock.fileno()

    @property
    def direct_io(self):
        """Selector.select_io writes and reads the socket (plaintext, connected)."""
        return self.channel.direct

    # -- connecting --

    def connect(self, now, timeout_ms):
        """Start a non-blocking connect. Raises KafkaConnectionError if it fails at once."""
        if self._setup_timeout is not None:
            timeout_ms = self._setup_timeout(self.failed_attempts)
        self.start_connect(now, now + timeout_ms)  # (IllegalStateError unless DISCONNECTED)
        self.last_attempt_ms = now
        self.error = None
        if not (isinstance(self.port, int) and 0 < self.port < 65536):  # getaddrinfo wraps it
            raise errors.KafkaConnectionError("cannot connect to %r:%r: port out of range" % (
                self.host, self.port))
        try:
            family, stype, proto, _, addr = self._next_address()
            sock = socket.socket(family, stype, proto)
        except (OSError, UnicodeError, ValueError, TypeError) as e:
            # a host name IDNA cannot encode (label too long or empty) raises UnicodeError
            raise errors.KafkaConnectionError(
                "cannot resolve/open %r:%s: %s" % (self.host, self.port, e)) from None
        self.use_socket(sock)
        try:
            sock.setblocking(False)
            for option in self._socket_options:
                sock.setsockopt(*option)
            rc = sock.connect_ex(addr)
        except OSError as e:
            raise errors.KafkaConnectionError(
                "connect to %s failed: %s" % (self._peer(), e)) from None
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY,
                      getattr(errno, "WSAEWOULDBLOCK", -1)):
            raise errors.KafkaConnectionError(
                "connect to %s failed: %s" % (self._peer(), errno.errorcode.get(rc, rc)))

    def _next_address(self):
        """The addrinfo to connect the socket to: the broker's next address (each in turn:
        client_dns_lookup=use_all_dns_ips), or the proxy's, and then the tunnel's target."""
        if self._proxy is not None and self._proxy.remote_dns:
            self._target = (self.host, self.port)
            return self._proxy.address()
        if not self._addrs:
            self._addrs = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        info = self._addrs.pop(0)
        if self._proxy is None:
            return info
        self._target = (info[4][0], self.port)
        return self._proxy.address()

    def finish_connect(self, now):
        """The socket became writable while CONNECTING: raise if the connect failed."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise errors.KafkaConnectionError("connect to %s failed: %s" % (
                self._peer(), errno.errorcode.get(err, err)))
        self.touch(now)
        if self._proxy is not None:  # the SOCKS5 exchange first, in HANDSHAKING
            self._tunnel = Socks5Handshake(self._proxy, *self._target)
            self.start_handshake()
        else:
            self._transport_ready(now)

    def _peer(self):
        if self._proxy is None:
            return "%s:%s" % (self.host, self.port)
        return "%s:%s through SOCKS5 proxy %s:%s" % (self.host, self.port, self._proxy.host,
                                                     self._proxy.port)

    def _transport_ready(self, now):
        """TCP (and the tunnel, if any) is up: plaintext goes to ApiVersions, TLS wraps the
        socket and starts its handshake."""
        if self._ssl_context is None:
            self.transport_ready(now)
            return
        try:  # same descriptor, so the selector registration stays valid
            sock = self._ssl_context.wrap_socket(
                self.sock, server_hostname=self.host, do_handshake_on_connect=False)
            self.use_socket(sock)
            # the ssl object's C half: read()/write() without ssl.py's Python wrappers
            tls = getattr(sock, "_sslobj", None) or _SslCalls(sock)
        except (OSError, ValueError) as e:
            raise ssl_failure(e, self.node_id, self.host, self.port, "setup") from e
        self.start_handshake(tls, RECV_CHUNK)

    def handshake(self, now):
        """One non-blocking step of the SOCKS5 exchange, then of the TLS handshake; True once
        both are done (the connection is CHECKING_API_VERSIONS)."""
        if self._tunnel is not None:
            try:
                if not self._tunnel.step(self.sock):
                    self.handshake_waits(self._tunnel.wants_write)
                    return False
            except OSError as e:
                raise errors.KafkaConnectionError("SOCKS5 exchange with %s failed: %s" % (
                    self._peer(), e)) from None
            self._tunnel = None
            self.touch(now)
            self._transport_ready(now)
            if self._ssl_context is None:
                return True
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.handshake_waits(False)
            return False
        except ssl.SSLWantWriteError:
            self.handshake_waits(True)
            return False
        except OSError as e:
            raise ssl_failure(e, self.node_id, self.host, self.port, "handshake") from e
        self.transport_ready(now)
        return True

    def handshake_summary(self):
        """What handshake() finished, for the log."""
        done = [] if self._proxy is None else ["SOCKS5 tunnel through %s:%s open" % (
            self._proxy.host, self._proxy.port)]
        if self._ssl_context is not None:
            done.append("TLS handshake done (%s)" % self.sock.version())
        return ", ".join(done)

    def set_ready(self, api_versions, reauth_at_ms=None):
        """Link.set_ready, and the reconnect backoff starts over."""
        super().set_ready(api_versions, reauth_at_ms)
        self.authenticator = None
        self.failed_attempts = 0
        self.reconnect_backoff_ms = 0

    def readdress(self, host, port):
        """Link.readdress: the next attempt resolves host afresh."""
        super().readdress(host, port)
        self._addrs = []

    def close(self, error, now):
        """Close the socket (Link.close: returns the requests that were in flight) and start
        the reconnect backoff."""
        if self.state != DISCONNECTED:
            self.last_attempt_ms = now
            self.reconnect_backoff_ms = self._backoff.backoff(self.failed_attempts)
            self.failed_attempts += 1
        self.error = error
        self.authenticator = None
        self._tunnel = None
        return super().close(error, now)
