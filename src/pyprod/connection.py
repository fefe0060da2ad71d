"""One broker connection: a non-blocking socket, its state, its in-flight FIFO.

Java splits this over KafkaChannel, ClusterConnectionStates and InFlightRequests; here one object
per node holds it all and lives across reconnects (it keeps the reconnect backoff). Its byte
streams (requests waiting to be written, response frames being read) are a kcore Channel. It does
no select(): NetworkClient polls the sockets and calls connect/finish_connect/write/read/close.
Kafka answers requests on one connection in order, so responses must match the FIFO head.
With TLS the socket is wrapped once TCP connects (Java's SslTransportLayer): the handshake runs
non-blocking in HANDSHAKING, then the same read/write paths go through the ssl object, which
releases the GIL while it encrypts; each batch buffer is handed to it uncopied.
"""
import collections
import errno
import os
import random
import socket
import ssl
import sys

from kcore import RECV_CHUNK, Channel
from pyprod import errors

DISCONNECTED = "DISCONNECTED"
CONNECTING = "CONNECTING"
HANDSHAKING = "HANDSHAKING"            # TLS handshake
CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
AUTHENTICATING = "AUTHENTICATING"      # SASL exchange (first, or re-authentication)
READY = "READY"
SETTING_UP = (CONNECTING, HANDSHAKING, CHECKING_API_VERSIONS, AUTHENTICATING)

MAX_DELAY_MS = sys.maxsize
_NEVER = -(1 << 62)
_SSL_SMALL = 4096       # smaller buffers are joined into one TLS write (one record, one syscall)
_SSL_JOIN_MAX = 16384
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


def _drop_tracebacks(error):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__


class InFlightRequest:
    """A request written (or being written) on a connection."""
    __slots__ = ("correlation_id", "api_key", "api_version", "response_header_version",
                 "expects_response", "callback", "send_ms", "timeout_ms", "internal")

    def __init__(self, correlation_id, api_key, api_version, response_header_version,
                 expects_response, callback, send_ms, timeout_ms, internal=None):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version
        self.response_header_version = response_header_version
        self.expects_response = expects_response
        self.callback = callback
        self.send_ms = send_ms
        self.timeout_ms = timeout_ms
        self.internal = internal  # None, or a tag for requests the client handles itself

    def __repr__(self):
        return "InFlightRequest(corr=%d, api=%d v%d)" % (
            self.correlation_id, self.api_key, self.api_version)


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
        self.error = None                     # why it last closed
        self.last_activity_ms = 0
        self.connect_deadline_ms = MAX_DELAY_MS
        self.sel_mask = 0                     # selector events registered (NetworkClient)
        self.failed_attempts = 0
        self.last_attempt_ms = _NEVER
        self.reconnect_backoff_ms = 0
        self._backoff = backoff or ExponentialBackoff(50, 30000)  # kafka-python's defaults
        self._channel = Channel(int(receive_message_max_bytes),
                                "node %s (%s:%s)" % (node_id, host, port))
        self._addrs = []
        self._ssl_context = ssl_context
        self._tls = False                    # the socket is an SSLSocket
        self._hs_wants_write = False
        self._ssl_retry = None               # (views, joined bytes) of a TLS write to redo as is
        self.authenticator = None            # SaslClientAuthenticator while one runs
        self.reauth_at_ms = None             # KIP-368: authenticate again from then on
        self._tls_rbuf = None                # what the ssl object decrypts into

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
        if self.state == HANDSHAKING:
            return self._hs_wants_write
        return self.state == CONNECTING or self._channel.wants_write

    def fileno(self):
        return self.sock.fileno()

    @property
    def channel(self):
        """The kcore Channel with this connection's byte streams."""
        return self._channel

    @property
    def direct_io(self):
        """Selector.select_io writes and reads the socket (plaintext, connected)."""
        return self._channel.direct

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
            self._channel.attach(self.sock)  # Selector.select_io does its I/O from now on
            return
        try:  # same descriptor, so the selector registration stays valid
            self.sock = self._ssl_context.wrap_socket(
                self.sock, server_hostname=self.host, do_handshake_on_connect=False)
        except (OSError, ValueError) as e:
            raise ssl_failure(e, self.node_id, self.host, self.port, "setup") from e
        self._tls = True
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
        self._tls = False
        self._ssl_retry = None
        self.authenticator = None
        self.reauth_at_ms = None
        failed = list(self.in_flight)
        self.in_flight.clear()
        self._channel.clear()
        return failed

    # -- sending --

    def enqueue(self, request, buffers):
        """Queue a whole frame (list of bytes-like) for writing; the request joins the FIFO."""
        self.in_flight.append(request)
        self._channel.enqueue(request, buffers)

    def write(self, now):
        """Write as much as the socket takes. Returns requests whose bytes are now fully written
        and that expect no response (they leave the FIFO). Raises KafkaConnectionError."""
        try:
            written = self._tls_write() if self._tls else self._channel.write(self.sock)
        except OSError as e:
            if self._tls:
                raise ssl_failure(e, self.node_id, self.host, self.port, "write") from e
            raise self._send_failed(e) from None
        return self._written(written, now)

    def _send_failed(self, e):
        return errors.KafkaConnectionError("send to node %s failed: %s" % (self.node_id, e))

    def _written(self, written, now):
        self.last_activity_ms = now
        done = []
        for req in written:
            if not req.expects_response:
                self.in_flight.remove(req)
                self.unanswered.append(req.correlation_id)
                done.append(req)
        return done

    def _tls_write(self):
        written, channel = [], self._channel
        while channel.wants_write:
            try:
                n = self._ssl_send(channel.pending())
            except (BlockingIOError, InterruptedError):
                break
            written += channel.advance(n)  # (frames with no bytes left complete on 0 too)
            if not n:
                break
        return written

    def _ssl_send(self, iov):
        """Bytes of iov the ssl object took. SSL_write takes a buffer whole or not at all, and a
        write it refused must be offered again unchanged: small buffers are joined, large ones
        go as they are (the encryption is their one copy)."""
        sent, i, sock = 0, 0, self.sock
        while i < len(iov):
            if self._ssl_retry is not None:
                count, data = self._ssl_retry
            elif len(iov[i]) >= _SSL_SMALL:
                count, data = 1, iov[i]
            else:
                count, size = 0, 0
                while i + count < len(iov) and len(iov[i + count]) < _SSL_SMALL and \
                        size + len(iov[i + count]) <= _SSL_JOIN_MAX:
                    size += len(iov[i + count])
                    count += 1
                data = iov[i] if count == 1 else b"".join(iov[i:i + count])
            try:
                n = sock.send(data)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                self._ssl_retry = (count, data) if count > 1 else None
                if sent:
                    return sent
                raise BlockingIOError(errno.EAGAIN, "TLS write would block") from None
            self._ssl_retry = None
            sent += n
            i += count
        return sent

    # -- receiving --

    def read(self, now, max_reads=32):
        """Read what is available. Returns (frames, error): the complete frames (bytes-like,
        without the size prefix) and None, or the error that ends the connection
        (KafkaConnectionError on EOF/socket error, InvalidReceiveError on a bad frame size);
        frames that arrived before the error are still returned."""
        frames = []
        return frames, self._received(frames, now, lambda: self._tls_read(
            frames, max_reads) if self._tls else self._channel.read(self.sock, frames, max_reads))

    def collect(self, now):
        """After Selector.select_io did this connection's I/O: (the requests it finished writing
        that expect no response, the frames it read, the error that ends the connection)."""
        tags, err = self._channel.take_written()
        done = self._written(tags, now) if tags else []
        if err:
            error = self._send_failed(OSError(err, os.strerror(err)))
            _drop_tracebacks(error)
            return done, [], error
        frames = []
        return done, frames, self._received(frames, now, lambda: self._take_received(frames))

    def _take_received(self, frames):
        got, eof, err = self._channel.take_received(frames)
        if err:
            raise OSError(err, os.strerror(err))
        return got, eof

    def _received(self, frames, now, receive):
        """receive() adds frames and returns (bytes, eof): the error that ends the connection,
        or None."""
        try:
            try:
                got, eof = receive()
            except OSError as e:
                raise errors.KafkaConnectionError(
                    "receive from node %s failed: %s" % (self.node_id, e)) from None
            if got:
                self.last_activity_ms = now
            if eof:
                raise errors.KafkaConnectionError(
                    "connection to node %s (%s:%s) closed by the broker" % (
                        self.node_id, self.host, self.port))
        except errors.KafkaError as e:
            _drop_tracebacks(e)  # its frames hold the frames list: a cycle for the gc to find
            return e
        return None

    def _tls_read(self, frames, max_reads):
        """As Channel.read, through the ssl object: it hands out one TLS record per call, so
        read on until it would block."""
        if self._tls_rbuf is None:
            self._tls_rbuf = memoryview(bytearray(RECV_CHUNK))
        got = 0
        for _ in range(max_reads):
            try:
                n = self.sock.recv_into(self._tls_rbuf)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except _SSL_CLOSED:
                return got, True
            except ssl.SSLError as e:
                raise ssl_failure(e, self.node_id, self.host, self.port, "read") from e
            if n == 0:
                return got, True
            got += n
            self._channel.feed(self._tls_rbuf, n, frames)
        return got, False

    def complete_next(self, correlation_id):
        """Pop the FIFO head for a response (None for an answer to a request that expected
        none); a mismatch raises CorrelationIdError."""
        if correlation_id in self.unanswered and (
                not self.in_flight or self.in_flight[0].correlation_id != correlation_id):
            self.unanswered.remove(correlation_id)
            return None
        if not self.in_flight:
            raise errors.CorrelationIdError(
                "node %s sent a response (correlation id %d) with no request in flight" % (
                    self.node_id, correlation_id))
        head = self.in_flight[0]
        if head.correlation_id != correlation_id or not head.expects_response:
            raise errors.CorrelationIdError(
                "node %s: expected a response to correlation id %d, got %d" % (
                    self.node_id, head.correlation_id, correlation_id))
        return self.in_flight.popleft()

    def expired_request(self, now):
        """The first in-flight request past its timeout, or None."""
        for req in self.in_flight:
            if now - req.send_ms >= req.timeout_ms:
                return req
        return None

    def next_deadline(self):
        """Earliest request timeout or connect deadline (ms), MAX_DELAY_MS if none."""
        t = self.connect_deadline_ms if self.state != READY else MAX_DELAY_MS
        for req in self.in_flight:
            t = min(t, req.send_ms + req.timeout_ms)
        return t
