"""One broker connection: a non-blocking socket, its state, send/receive buffers, in-flight FIFO.

Java splits this over KafkaChannel, ClusterConnectionStates and InFlightRequests; here one object
per node holds it all and lives across reconnects (it keeps the reconnect backoff). It does no
select(): NetworkClient polls the sockets and calls connect/finish_connect/write/read/close.
Kafka answers requests on one connection in order, so responses must match the FIFO head.
"""
import collections
import errno
import random
import socket
import sys

from kcore import MAX_IOV, recv_into, send_buffers
from pyprod import errors

DISCONNECTED = "DISCONNECTED"
CONNECTING = "CONNECTING"
CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
READY = "READY"

MAX_DELAY_MS = sys.maxsize
_NEVER = -(1 << 62)
_RECV_CHUNK = 65536
_MAX_IOV = MAX_IOV


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


def _set_socket_options(sock, config):
    for opt in config.get("socket_options") or ():
        sock.setsockopt(*opt)
    if config.get("send_buffer_bytes"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config["send_buffer_bytes"])
    if config.get("receive_buffer_bytes"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config["receive_buffer_bytes"])


class BrokerConnection:
    def __init__(self, node_id, host, port, config, backoff=None):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.config = config
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
        self._backoff = backoff or ExponentialBackoff(
            config.get("reconnect_backoff_ms", 50), config.get("reconnect_backoff_max_ms", 30000))
        self._max_frame = int(config.get("receive_message_max_bytes", 100_000_000))
        self._addrs = []
        self._out = collections.deque()  # [request, [memoryview, ...]] not fully written
        self._rbuf = None
        self._size_buf = bytearray(4)
        self._size_got = 0
        self._frame = None                 # bytearray of the frame being read, or None
        self._frame_size = 0

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
        return self.state in (CHECKING_API_VERSIONS, READY)

    @property
    def wants_write(self):
        return self.state == CONNECTING or bool(self._out)

    def fileno(self):
        return self.sock.fileno()

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
        try:
            if not self._addrs:  # client_dns_lookup=use_all_dns_ips: try each address in turn
                self._addrs = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
            family, stype, proto, _, addr = self._addrs.pop(0)
            sock = socket.socket(family, stype, proto)
        except OSError as e:
            raise errors.KafkaConnectionError(
                "cannot resolve/open %s:%s: %s" % (self.host, self.port, e)) from None
        self.sock = sock
        try:
            sock.setblocking(False)
            _set_socket_options(sock, self.config)
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
        self.state = CHECKING_API_VERSIONS
        self.last_activity_ms = now

    def set_ready(self, api_versions):
        self.api_versions = api_versions
        self.state = READY
        self.failed_attempts = 0
        self.reconnect_backoff_ms = 0
        self.connect_deadline_ms = MAX_DELAY_MS

    def close(self, error, now):
        """Close the socket; returns the requests that were in flight (oldest first)."""
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
        failed = list(self.in_flight)
        self.in_flight.clear()
        self._out.clear()
        self._frame = None
        self._size_got = 0
        return failed

    # -- sending --

    def enqueue(self, request, buffers):
        """Queue a whole frame (list of bytes-like) for writing; the request joins the FIFO."""
        views = []
        for b in buffers:
            mv = b if isinstance(b, memoryview) else memoryview(b)
            if mv.ndim != 1 or mv.itemsize != 1:
                mv = mv.cast("B")
            if len(mv):
                views.append(mv)
        self.in_flight.append(request)
        self._out.append([request, views])

    def write(self, now):
        """Write as much as the socket takes. Returns requests whose bytes are now fully written
        and that expect no response (they leave the FIFO). Raises KafkaConnectionError."""
        done = []
        out = self._out
        while out:
            iov = []
            for _, views in out:
                iov.extend(views[:_MAX_IOV - len(iov)])
                if len(iov) >= _MAX_IOV:
                    break
            try:
                n = send_buffers(self.sock, iov)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                raise errors.KafkaConnectionError(
                    "send to node %s failed: %s" % (self.node_id, e)) from None
            if not n:
                break
            self.last_activity_ms = now
            written = n
            while out and written:
                req, views = out[0]
                while views and written:
                    head = views[0]
                    if written >= len(head):
                        written -= len(head)
                        views.pop(0)
                    else:
                        views[0] = head[written:]
                        written = 0
                if views:
                    break
                out.popleft()
                if not req.expects_response:
                    self.in_flight.remove(req)
                    self.unanswered.append(req.correlation_id)
                    done.append(req)
            while out and not out[0][1]:  # zero-length frames cannot happen, but be safe
                req = out.popleft()[0]
                if not req.expects_response:
                    self.in_flight.remove(req)
                    self.unanswered.append(req.correlation_id)
                    done.append(req)
        return done

    # -- receiving --

    def read(self, now, max_reads=32):
        """Read what is available. Returns (frames, error): the complete frames (bytes-like,
        without the size prefix) and None, or the error that ends the connection
        (KafkaConnectionError on EOF/socket error, InvalidReceiveError on a bad frame size);
        frames that arrived before the error are still returned."""
        if self._rbuf is None:
            self._rbuf = bytearray(_RECV_CHUNK)
            self._rview = memoryview(self._rbuf)
        frames = []
        view = self._rview
        try:
            for _ in range(max_reads):
                try:
                    n = recv_into(self.sock, self._rbuf)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as e:
                    raise errors.KafkaConnectionError(
                        "receive from node %s failed: %s" % (self.node_id, e)) from None
                if n == 0:
                    raise errors.KafkaConnectionError(
                        "connection to node %s (%s:%s) closed by the broker" % (
                            self.node_id, self.host, self.port))
                self.last_activity_ms = now
                self._parse(view, n, frames)
                if n < len(self._rbuf):
                    break
        except errors.KafkaError as e:
            return frames, e
        return frames, None

    def _parse(self, view, n, frames):
        pos = 0
        while pos < n:
            if self._frame is None:
                take = min(4 - self._size_got, n - pos)
                self._size_buf[self._size_got:self._size_got + take] = view[pos:pos + take]
                self._size_got += take
                pos += take
                if self._size_got < 4:
                    return
                self._size_got = 0
                size = int.from_bytes(self._size_buf, "big", signed=True)
                if size < 4 or size > self._max_frame:
                    raise errors.InvalidReceiveError(
                        "node %s (%s:%s) sent a frame of %d bytes (valid: 4..%d, "
                        "receive_message_max_bytes); closing the connection" % (
                            self.node_id, self.host, self.port, size, self._max_frame))
                if n - pos >= size:  # whole frame in this chunk: one copy
                    frames.append(bytes(view[pos:pos + size]))
                    pos += size
                    continue
                self._frame = bytearray()  # grows as bytes arrive, never preallocated
                self._frame_size = size
            take = min(self._frame_size - len(self._frame), n - pos)
            self._frame += view[pos:pos + take]
            pos += take
            if len(self._frame) == self._frame_size:
                frames.append(self._frame)
                self._frame = None

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
