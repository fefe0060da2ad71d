"""One broker connection: a non-blocking socket, its state, its in-flight FIFO.

Java splits this over KafkaChannel, ClusterConnectionStates and InFlightRequests; here one object
per node holds it all and lives across reconnects (it keeps the reconnect backoff). Its byte
streams (requests waiting to be written, response frames being read) are a kcore Channel. It does
no select(): NetworkClient polls the sockets and calls connect/finish_connect/write/read/close.
Kafka answers requests on one connection in order, so responses must match the FIFO head.
With TLS the socket is wrapped once TCP connects (Java's SslTransportLayer): the handshake runs
non-blocking in HANDSHAKING, then the same read/write paths go through the ssl object, which
releases the GIL while it encrypts; each batch buffer is handed to it uncopied. The reads,
writes and FIFO matching themselves are kcore.network_poll's (compiled), on these attributes.
"""
import collections
import errno
import random
import socket
import ssl

from kcore import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED,  # noqa: F401
                   HANDSHAKING, MAX_DELAY_MS, READY, RECV_CHUNK, SETTING_UP, Channel,
                   InFlightRequest, network_poll)
from pyprod import errors

_NEVER = -(1 << 62)
# ssl errors that mean the peer went away, not that it refused us
_SSL_CLOSED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


def ssl_failure(e, node_id, host, port, when):
    """The typed error for an ssl error: SslAuthenticationError (not retriable) when the peer
    refused us or we refused it, else KafkaConnectionError (the connection just dropped)."""
    text = "SSL %s with node %s (%s:%s) failed: %s" % (
        when, node_id, host, port, getattr(e, "verify_message", None) or e)
    if isinstance(e, _SSL_CLOSED) or not isinstance(e, ssl.SSLError):
        err = errors.KafkaConnectionError(text)
    else:
        err = errors.SslAuthenticationError(text, ssl_error=e)
    err.__cause__ = e
    return err


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


def _drop_tracebacks(error):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__


class ExponentialBackoff:
    """Java's ExponentialBackoff: initial * 2**attempts, capped at max, then +/- jitter."""
    __slots__ = ("initial", "maximum", "jitter", "_exp_max")

    def __init__(self, initial, maximum, jitter=0.2):
        import math
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


def socket_options(socket_options=(), send_buffer_bytes=None, receive_buffer_bytes=None):
    """kafka-python's socket settings as one list of setsockopt() arguments."""
    options = list(socket_options or ())
    if send_buffer_bytes:
        options.append((socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes))
    if receive_buffer_bytes:
        options.append((socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes))
    return options


class BrokerConnection:
    def __init__(self, node_id, host, port, *, backoff=None, ssl_context=None,
                 socket_options=(), receive_message_max_bytes=100_000_000):
        self.node_id = node_id
        self.host = host
        self.port = port
        self._socket_options = socket_options
        self.state = DISCONNECTED
        self.sock = None
        self.in_flight = collections.deque()  # InFlightRequest, oldest first
        # correlation ids of written requests that expected no answer (acks=0): some brokers
        # (tansu) answer anyway, and those answers are skipped, not a protocol error
        self.unanswered = collections.deque(maxlen=1024)
        self.api_versions = None              # {api_key: (min, max)} once checked
        self.produce_version = None           # (api_versions, Produce version) (SenderLoop)
        self.error = None                     # why it last closed
        self.last_activity_ms = 0
        self.connect_deadline_ms = MAX_DELAY_MS
        self.sel_mask = 0                     # selector events registered (NetworkClient)
        self.failed_attempts = 0
        self.last_attempt_ms = _NEVER
        self.reconnect_backoff_ms = 0
        self._backoff = backoff or ExponentialBackoff(50, 30000)  # kafka-python's defaults
        # this connection's byte streams (kcore.network_poll reads and writes them)
        self.channel = Channel(int(receive_message_max_bytes),
                                "node %s (%s:%s)" % (node_id, host, port))
        self._addrs = []
        self._ssl_context = ssl_context
        self._hs_wants_write = False
        self._ssl_retry = None               # (views, joined bytes) of a TLS write to redo as is
        self.authenticator = None            # SaslClientAuthenticator while one runs
        self.reauth_at_ms = None             # KIP-368: authenticate again from then on
        self._tls_rbuf = None                # what the ssl object decrypts into (TLS)
        self.tls = None                      # TLS: the ssl object's read(n, buffer), write()

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

    @property
    def wants_write(self):
        return network_poll.wants_write(self)

    def fileno(self):
        return self.sock.fileno()

    @property
    def direct_io(self):
        """Selector.select_io writes and reads the socket (plaintext, connected)."""
        return self.channel.direct

    # -- connecting --

    def connect(self, now, timeout_ms):
        """Start a non-blocking connect. Raises KafkaConnectionError if it fails at once."""
        if self.state != DISCONNECTED:
            raise errors.IllegalStateError("connect() on a %s connection" % self.state)
        self.last_attempt_ms = now
        self.state = CONNECTING
        self.error = None
        self.api_versions = None
        self.connect_deadline_ms = now + timeout_ms
        self.last_activity_ms = now
        if not (isinstance(self.port, int) and 0 < self.port < 65536):  # getaddrinfo wraps it
            raise errors.KafkaConnectionError("cannot connect to %r:%r: port out of range" % (
                self.host, self.port))
        try:
            if not self._addrs:  # client_dns_lookup=use_all_dns_ips: try each address in turn
                self._addrs = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            family, stype, proto, _, addr = self._addrs.pop(0)
            sock = socket.socket(family, stype, proto)
        except (OSError, UnicodeError, ValueError, TypeError) as e:
            # a host name IDNA cannot encode (label too long or empty) raises UnicodeError
            raise errors.KafkaConnectionError(
                "cannot resolve/open %r:%s: %s" % (self.host, self.port, e)) from None
        self.sock = sock
        try:
            sock.setblocking(False)
            for option in self._socket_options:
                sock.setsockopt(*option)
            rc = sock.connect_ex(addr)
        except OSError as e:
            raise errors.KafkaConnectionError(
                "connect to %s:%s failed: %s" % (self.host, self.port, e)) from None
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY,
                      getattr(errno, "WSAEWOULDBLOCK", -1)):
            raise errors.KafkaConnectionError(
                "connect to %s:%s failed: %s" % (self.host, self.port, errno.errorcode.get(rc, rc)))

    def finish_connect(self, now):
        """The socket became writable while CONNECTING: raise if the connect failed."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            raise errors.KafkaConnectionError("connect to %s:%s failed: %s" % (
                self.host, self.port, errno.errorcode.get(err, err)))
        self.last_activity_ms = now
        if self._ssl_context is None:
            self.state = CHECKING_API_VERSIONS
            self.channel.attach(self.sock)  # Selector.select_io does its I/O from now on
            return
        try:  # same descriptor, so the selector registration stays valid
            self.sock = self._ssl_context.wrap_socket(
                self.sock, server_hostname=self.host, do_handshake_on_connect=False)
            if self._tls_rbuf is None:  # what the ssl object decrypts into
                self._tls_rbuf = memoryview(bytearray(RECV_CHUNK))
            # the ssl object's C half: read()/write() without ssl.py's Python wrappers
            self.tls = getattr(self.sock, "_sslobj", None) or _SslCalls(self.sock)
        except (OSError, ValueError) as e:
            raise ssl_failure(e, self.node_id, self.host, self.port, "setup") from e
        self.state = HANDSHAKING
        self._hs_wants_write = True

    def handshake(self, now):
        """One non-blocking step of the TLS handshake; True once it is done."""
        try:
            self.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._hs_wants_write = False
            return False
        except ssl.SSLWantWriteError:
            self._hs_wants_write = True
            return False
        except OSError as e:
            raise ssl_failure(e, self.node_id, self.host, self.port, "handshake") from e
        self.last_activity_ms = now
        self.state = CHECKING_API_VERSIONS
        return True

    def set_ready(self, api_versions):
        self.api_versions = api_versions
        self.state = READY
        self.authenticator = None
        self.failed_attempts = 0
        self.reconnect_backoff_ms = 0
        self.connect_deadline_ms = MAX_DELAY_MS

    def close(self, error, now):
        """Close the socket; returns the requests that were in flight (oldest first). The
        error loses its traceback: kept here and in futures, it would keep the frame it was
        raised over (up to receive_message_max_bytes) alive."""
        _drop_tracebacks(error)
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.state != DISCONNECTED:
            self.state = DISCONNECTED
            self.last_attempt_ms = now
            self.reconnect_backoff_ms = self._backoff.backoff(self.failed_attempts)
            self.failed_attempts += 1
        self.error = error
        self.connect_deadline_ms = MAX_DELAY_MS
        self.tls = None
        self._ssl_retry = None
        self.authenticator = None
        self.reauth_at_ms = None
        failed = list(self.in_flight)
        self.in_flight.clear()
        self.channel.clear()
        return failed

    # -- sending --

    def enqueue(self, request, buffers):
        """Queue a whole frame (list of bytes-like) for writing; the request joins the FIFO."""
        self.in_flight.append(request)
        self.channel.enqueue(request, buffers)

    def write(self, now):
        """Write as much as the socket takes. Returns requests whose bytes are now fully written
        and that expect no response (they leave the FIFO). Raises KafkaConnectionError."""
        return network_poll.conn_write(self, now)

    def _send_failed(self, e):
        return errors.KafkaConnectionError("send to node %s failed: %s" % (self.node_id, e))

    def _write_failed(self, e):
        """The error that ends the connection for a failed direct write (an OSError)."""
        error = self._send_failed(e)
        _drop_tracebacks(error)
        return error

    def _ssl_failure(self, e, when):
        return ssl_failure(e, self.node_id, self.host, self.port, when)

    # -- receiving --

    def read(self, now, max_reads=32):
        """Read what is available. Returns (frames, error): the complete frames (bytes-like,
        without the size prefix) and None, or the error that ends the connection
        (KafkaConnectionError on EOF/socket error, InvalidReceiveError on a bad frame size);
        frames that arrived before the error are still returned."""
        return network_poll.conn_read(self, now, max_reads)

    def collect(self, now):
        """After Selector.select_io did this connection's I/O: (the requests it finished writing
        that expect no response, the frames it read, the error that ends the connection)."""
        return network_poll.collect(self, now)

    def _receive_failed(self, error):
        """The error that ends the connection for a failed read: a KafkaError (a bad frame, a
        refused TLS read) as it is, an OSError as a KafkaConnectionError, None (the broker
        closed it) as one saying so; without tracebacks."""
        try:
            if error is None:
                raise errors.KafkaConnectionError(
                    "connection to node %s (%s:%s) closed by the broker" % (
                        self.node_id, self.host, self.port))
            if isinstance(error, OSError):
                raise errors.KafkaConnectionError(
                    "receive from node %s failed: %s" % (self.node_id, error)) from None
            raise error
        except errors.KafkaError as e:
            _drop_tracebacks(e)  # its frames hold the frames list: a cycle for the gc to find
            return e

    def complete_next(self, correlation_id):
        """Pop the FIFO head for a response (None for an answer to a request that expected
        none); a mismatch raises CorrelationIdError."""
        return network_poll.complete_next(self, correlation_id)

    def expired_request(self, now):
        """The first in-flight request past its timeout, or None."""
        return network_poll.expired_request(self, now)

    def next_deadline(self):
        """Earliest request timeout or connect deadline (ms), MAX_DELAY_MS if none."""
        return network_poll.conn_deadline(self)

