"""One broker connection (Java's KafkaChannel with its InFlightRequests and its
ClusterConnectionStates entry), the same in both implementations (see kcore/___init__.py):
the connection states, an in-flight request, the BrokerConnection, and the errors that end a
connection. kcore.network_poll compiles it in, before kcore/_network_poll.py.
"""
import collections
import errno
import os
import ssl
import sys

from kcore.errors import (CorrelationIdError, IllegalStateError, KafkaConnectionError,
                          KafkaError, SslAuthenticationError)

if "Channel" not in globals():  # the pure twin: kcore/network_poll.pyx imports the compiled one
    from kcore.pure.channel import Channel

# Connection states (BrokerConnection.state)
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
_SSL_WANT = (ssl.SSLWantWriteError, ssl.SSLWantReadError)


def drop_tracebacks(error):
    """An error kept on a connection or a future loses its tracebacks: they would keep the
    frames it was raised over (up to receive_message_max_bytes) alive."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        error.__traceback__ = None
        error = error.__cause__ or error.__context__


def ssl_failure(e, node_id, host, port, when):
    """The typed error for an ssl error: SslAuthenticationError (not retriable) when the peer
    refused us or we refused it, else KafkaConnectionError (the connection just dropped)."""
    text = "SSL %s with node %s (%s:%s) failed: %s" % (
        when, node_id, host, port, getattr(e, "verify_message", None) or e)
    if isinstance(e, _SSL_CLOSED) or not isinstance(e, ssl.SSLError):
        err = KafkaConnectionError(text)
    else:
        err = SslAuthenticationError(text, ssl_error=e)
    err.__cause__ = e
    return err


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


class BrokerConnection:
    """One broker connection, from its first attempt on (it lives across reconnects): its
    state, socket and byte streams, its in-flight FIFO, and its attempts (when the last began,
    how many failed in a row, why it last closed). It alone changes its fields (the methods
    below). ``setup`` is the policy that sets it up (pyprod's ConnectionSetup: connect, proxy,
    TLS, reconnect backoff); kcore never calls it, pyprod's ConnectionLifecycle (NetworkPoll's
    hooks) does.
    ``channel`` is its framing buffer (kcore.channel.Channel: the requests to write, the
    response frames being read). Kafka answers in order: responses match the FIFO head."""

    def __init__(self, node_id, host, port, channel=None, setup=None):
        self.node_id, self.host, self.port = node_id, host, port
        self.state = DISCONNECTED
        self.sock = None
        if channel is None:
            channel = Channel(100_000_000, "node %s (%s:%s)" % (node_id, host, port))
        self.channel = channel
        self.setup = setup
        self.in_flight = collections.deque()  # InFlightRequest, oldest first
        # correlation ids of written requests that expected no answer (acks=0): some brokers
        # (tansu) answer anyway, and those answers are skipped, not a protocol error
        self.unanswered = collections.deque(maxlen=1024)
        self.api_versions = None              # {api_key: (min, max)} once checked
        self.produce_version = None           # (api_versions, Produce version)
        self.last_activity_ms = 0
        self.last_attempt_ms = _NEVER         # the last attempt began, or ended, then
        self.failed_attempts = 0              # attempts in a row that closed before READY
        self.error = None                     # why it last closed
        self.connect_deadline_ms = MAX_DELAY_MS
        self.reauth_at_ms = None              # KIP-368: authenticate again from then on
        self.sel_mask = 0                     # selector events registered
        self.tls = None                       # TLS: the ssl object's read(n, buffer), write()
        self.tls_rbuf = None                  # what the ssl object decrypts into (TLS)
        self.ssl_retry = None                 # (count, joined bytes) of a TLS write to redo
        self.hs_wants_write = False           # the TLS handshake waits for writability

    def __repr__(self):
        return "<BrokerConnection node=%s %s:%s %s>" % (
            self.node_id, self.host, self.port, self.state)

    # -- the state transitions (the setup policy calls these; it sets no field itself) --

    def start_connect(self, now, deadline_ms):
        """DISCONNECTED -> CONNECTING: a new attempt, set up by deadline_ms."""
        if self.state != DISCONNECTED:
            raise IllegalStateError("connect on a %s connection to node %s" % (
                self.state, self.node_id))
        self.state = CONNECTING
        self.api_versions = self.error = None
        self.connect_deadline_ms = deadline_ms
        self.last_activity_ms = self.last_attempt_ms = now

    def use_socket(self, sock):
        """The socket of this attempt (connecting), or its TLS wrapping (same descriptor)."""
        self.sock = sock

    def readdress(self, host, port):
        """The broker moved (new metadata): the next attempt goes to host:port."""
        if self.state != DISCONNECTED:
            raise IllegalStateError("readdress on a %s connection" % self.state)
        self.host, self.port = host, port

    def touch(self, now):
        self.last_activity_ms = now

    def start_handshake(self, tls=None, rbuf_size=0):
        """-> HANDSHAKING (a proxy exchange, or TLS: tls is the ssl object's read/write, its
        reads decrypt into a buffer of rbuf_size)."""
        if tls is not None:
            if self.tls_rbuf is None:
                self.tls_rbuf = memoryview(bytearray(rbuf_size))
            self.tls = tls
        self.state = HANDSHAKING
        self.hs_wants_write = True

    def handshake_waits(self, wants_write):
        """The handshake waits for writability (True) or readability (False)."""
        self.hs_wants_write = wants_write

    def transport_ready(self, now):
        """-> CHECKING_API_VERSIONS: TCP (tunnel, TLS) is up. Plaintext I/O is the Channel's
        (Selector.select_io) from now on."""
        self.last_activity_ms = now
        self.state = CHECKING_API_VERSIONS
        if self.tls is None:
            self.channel.attach(self.sock)

    def start_authentication(self, api_versions, deadline_ms):
        """-> AUTHENTICATING (first, or again for KIP-368), set up by deadline_ms."""
        self.api_versions = api_versions
        self.state = AUTHENTICATING
        self.connect_deadline_ms = deadline_ms
        self.reauth_at_ms = None

    def set_ready(self, api_versions, reauth_at_ms=None):
        """-> READY with the broker's {api_key: (min, max)}; authenticate again from
        reauth_at_ms (None: never)."""
        self.api_versions = api_versions
        self.state = READY
        self.connect_deadline_ms = MAX_DELAY_MS
        self.reauth_at_ms = reauth_at_ms
        self.failed_attempts = 0

    def forget_produce_version(self):
        """Pick the Produce version again on the next request."""
        self.produce_version = None

    @property
    def wants_write(self):
        """The socket's writability matters now."""
        state = self.state
        if state == HANDSHAKING:
            return self.hs_wants_write
        return state == CONNECTING or self.channel.wants_write

    def complete_next(self, correlation_id):
        """Pop the FIFO head for a response (None for an answer to a request that expected
        none); a mismatch raises CorrelationIdError."""
        in_flight = self.in_flight
        if correlation_id in self.unanswered and (
                not in_flight or in_flight[0].correlation_id != correlation_id):
            self.unanswered.remove(correlation_id)
            return None
        if not in_flight:
            raise CorrelationIdError(
                "node %s sent a response (correlation id %d) with no request in flight" % (
                    self.node_id, correlation_id))
        head = in_flight[0]
        if head.correlation_id != correlation_id or not head.expects_response:
            raise CorrelationIdError(
                "node %s: expected a response to correlation id %d, got %d" % (
                    self.node_id, head.correlation_id, correlation_id))
        return in_flight.popleft()

    def enqueue(self, request, buffers):
        """Queue a whole frame (a list of bytes-like) for writing; the request joins the FIFO."""
        self.in_flight.append(request)
        self.channel.enqueue(request, buffers)

    def written(self, tags, now):
        """The frames of tags are fully written: those that expect no response leave the FIFO
        and are returned."""
        self.last_activity_ms = now
        done = []
        for req in tags:
            if not req.expects_response:
                self.in_flight.remove(req)
                self.unanswered.append(req.correlation_id)
                done.append(req)
        return done

    def collect(self, now):
        """After Selector.select_io did this connection's I/O: (the requests it finished
        writing that expect no response, the frames it read, the error that ends the
        connection or None)."""
        channel = self.channel
        tags, err = channel.take_written()
        done = self.written(tags, now) if tags else []
        if err:
            return done, [], self.write_failed(OSError(err, os.strerror(err)))
        frames = []
        try:
            got, eof, err = channel.take_received(frames)
        except KafkaError as e:  # a bad frame size
            return done, frames, self.receive_failed(e)
        if err:
            return done, frames, self.receive_failed(OSError(err, os.strerror(err)))
        if got:
            self.last_activity_ms = now
        if eof:
            return done, frames, self.receive_failed(None)
        return done, frames, None

    # -- the byte streams: plaintext through the Channel, TLS through the ssl object --

    def write(self, now):
        """Write what the socket takes. Returns the requests now fully written that expect no
        response (they leave the FIFO). Raises KafkaConnectionError."""
        try:
            tags = self._tls_write() if self.tls is not None else self.channel.write(self.sock)
        except OSError as e:
            if self.tls is not None:
                raise ssl_failure(e, self.node_id, self.host, self.port, "write") from e
            raise self.send_failed(e) from None
        return self.written(tags, now)

    def _tls_write(self):
        tags, channel = [], self.channel
        while channel.wants_write:
            try:
                n = self._ssl_send(channel.pending())
            except (BlockingIOError, InterruptedError):
                break
            tags += channel.advance(n)  # (frames with no bytes left complete on 0 too)
            if not n:
                break
        return tags

    def _ssl_send(self, iov):
        """Bytes of iov the ssl object took. SSL_write takes a buffer whole or not at all, and
        a write it refused must be offered again unchanged: small buffers are joined, large
        ones go as they are (the encryption is their one copy)."""
        sent, i, tls = 0, 0, self.tls
        while i < len(iov):
            if self.ssl_retry is not None:
                count, data = self.ssl_retry
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
                n = tls.write(data)
            except _SSL_WANT:
                self.ssl_retry = (count, data) if count > 1 else None
                if sent:
                    return sent
                raise BlockingIOError(errno.EAGAIN, "TLS write would block") from None
            self.ssl_retry = None
            sent += n
            i += count
        return sent

    def read(self, now, max_reads=32):
        """Read what is available. Returns (frames, error): the complete frames (bytes-like,
        without the size prefix) and None, or the error that ends the connection; frames that
        arrived before the error are still returned."""
        frames = []
        try:
            if self.tls is not None:
                got, eof = self._tls_read(frames, max_reads)
            else:
                got, eof = self.channel.read(self.sock, frames, max_reads)
        except (KafkaError, OSError) as e:
            return frames, self.receive_failed(e)
        if got:
            self.last_activity_ms = now
        if eof:
            return frames, self.receive_failed(None)
        return frames, None

    def _tls_read(self, frames, max_reads):
        """As Channel.read, through the ssl object: it hands out one TLS record per call, so
        read on until it would block."""
        buf, tls, got = self.tls_rbuf, self.tls, 0
        size = len(buf)
        for _ in range(max_reads):
            try:
                n = tls.read(size, buf)
            except _SSL_WANT:
                break
            except _SSL_CLOSED:  # (SSLEOFError too: a ragged EOF is an EOF)
                return got, True
            except ssl.SSLError as e:
                raise ssl_failure(e, self.node_id, self.host, self.port, "read") from e
            if n == 0:
                return got, True
            got += n
            self.channel.feed(buf, n, frames)
        return got, False

    def close(self, error, now):
        """Close the socket and drop the byte streams; returns the requests that were in flight
        (oldest first). An open or opening connection counts a failed attempt."""
        drop_tracebacks(error)
        if self.state != DISCONNECTED:
            self.last_attempt_ms = now
            self.failed_attempts += 1
        self.error = error
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        self.state = DISCONNECTED
        self.connect_deadline_ms = MAX_DELAY_MS
        self.tls = self.ssl_retry = self.reauth_at_ms = None
        failed = list(self.in_flight)
        self.in_flight.clear()
        self.channel.clear()
        return failed

    # -- the errors that end a connection --

    def send_failed(self, e):
        return KafkaConnectionError("send to node %s failed: %s" % (self.node_id, e))

    def write_failed(self, e):
        """The error that ends the connection for a failed direct write (an OSError)."""
        error = self.send_failed(e)
        drop_tracebacks(error)
        return error

    def receive_failed(self, error):
        """The error that ends the connection for a failed read: a KafkaError (a bad frame, a
        refused TLS read) as it is, an OSError as a KafkaConnectionError, None (the broker
        closed it) as one saying so; without tracebacks."""
        if error is None:
            error = KafkaConnectionError("connection to node %s (%s:%s) closed by the broker" % (
                self.node_id, self.host, self.port))
        elif isinstance(error, OSError):
            error = KafkaConnectionError("receive from node %s failed: %s" % (self.node_id, error))
        drop_tracebacks(error)  # its frames hold the frames list: a cycle for the gc to find
        return error

    # -- timeouts --

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
