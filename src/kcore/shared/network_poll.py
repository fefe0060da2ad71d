"""The NetworkClient's data path (Java's NetworkClient.poll with its Selector, KafkaChannels and
InFlightRequests), the same in both implementations (see kcore/shared/__init__.py).

NetworkPoll owns it: the Selector and its Waker, every connection's Link (its socket, its
Channel, its in-flight FIFO, its TLS byte stream), the correlation ids and the completed
responses. It polls, queues requests, dispatches responses and times requests out, so that a
steady produce stream runs compiled. What needs a decision goes to the NetworkClient (pyprod)
through its hooks, only when it is due (see NetworkPoll).
"""
import collections
import errno
import logging
import os
import ssl
import sys
import time

from kcore.errors import (CorrelationIdError, IllegalStateError, KafkaConnectionError,
                          KafkaError, RequestTimedOutError, SslAuthenticationError)

_log = logging.getLogger("kcore.network_poll")

# Connection states (Link.state)
DISCONNECTED = "DISCONNECTED"
CONNECTING = "CONNECTING"
HANDSHAKING = "HANDSHAKING"            # TLS handshake
CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
AUTHENTICATING = "AUTHENTICATING"      # SASL exchange (first, or re-authentication)
READY = "READY"
SETTING_UP = (CONNECTING, HANDSHAKING, CHECKING_API_VERSIONS, AUTHENTICATING)
MAX_DELAY_MS = sys.maxsize

_READ, _WRITE = 1, 2                   # selectors.EVENT_READ, EVENT_WRITE
_IDLE_CHECK_MS = 1000
_MAX_WAIT_MS = 86_400_000              # select() refuses huge timeouts
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


class Link:
    """One broker connection's data path (Java's KafkaChannel with its InFlightRequests): its
    state, socket and byte streams (a kcore Channel; the ssl object under TLS), its in-flight
    FIFO. pyprod's BrokerConnection extends it with the connection's setup; NetworkPoll reads
    and writes only what is defined here. Kafka answers in order: responses match the FIFO head.
    """

    def __init__(self, node_id, host, port, channel):
        self.node_id, self.host, self.port = node_id, host, port
        self.state = DISCONNECTED
        self.sock = None
        self.channel = channel                # requests to write, response frames being read
        self.in_flight = collections.deque()  # InFlightRequest, oldest first
        # correlation ids of written requests that expected no answer (acks=0): some brokers
        # (tansu) answer anyway, and those answers are skipped, not a protocol error
        self.unanswered = collections.deque(maxlen=1024)
        self.api_versions = None              # {api_key: (min, max)} once checked
        self.produce_version = None           # (api_versions, Produce version)
        self.last_activity_ms = 0
        self.connect_deadline_ms = MAX_DELAY_MS
        self.reauth_at_ms = None              # KIP-368: authenticate again from then on
        self.sel_mask = 0                     # selector events registered
        self.tls = None                       # TLS: the ssl object's read(n, buffer), write()
        self.tls_rbuf = None                  # what the ssl object decrypts into (TLS)
        self.ssl_retry = None                 # (count, joined bytes) of a TLS write to redo
        self.hs_wants_write = False           # the TLS handshake waits for writability

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
        (oldest first). BrokerConnection extends it (the reconnect backoff)."""
        drop_tracebacks(error)
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


def now_ms():
    return int(time.monotonic() * 1000)


def _buffers(body):
    if isinstance(body, list):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        return [body]
    try:
        return list(body)
    except TypeError:
        raise TypeError("body must be bytes-like or a list of bytes-like, got %s"
                        % type(body).__name__) from None


class ClientResponse:
    """What a request's callback receives (Java's ClientResponse). ``body`` is the response body
    after the response header (bytes-like), None if ``error`` is set or for requests that expect
    no response."""
    __slots__ = ("node_id", "api_key", "api_version", "correlation_id", "body", "error",
                 "latency_ms")

    def __init__(self, node_id, api_key, api_version, correlation_id, body, error, latency_ms):
        self.node_id = node_id
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.body = body
        self.error = error
        self.latency_ms = latency_ms

    def __repr__(self):
        return "ClientResponse(node=%s, api=%d v%d, corr=%d, %s, %dms)" % (
            self.node_id, self.api_key, self.api_version, self.correlation_id,
            "error=%r" % (self.error,) if self.error is not None else
            "%s bytes" % (None if self.body is None else len(self.body)), self.latency_ms)




class NetworkPoll:
    """The NetworkClient's data path. ``hooks`` is the NetworkClient, which decides (its
    methods, called only when due): ``set_up(conn, now)`` (a connection CONNECTING or
    HANDSHAKING became ready: its next setup steps; True if its I/O goes on in this poll),
    ``reauthenticate(conn, now)``, ``connection_closed(conn, state, error, failed, now,
    request_update)`` (after conn.close(): returns the error for its failed requests),
    ``handle_internal(conn, req, body, now)``, ``response_header_end(frame)``,
    ``request_head(api_key, version)`` and ``api_version(node_id, api_key)``. ``metadata``
    has ``update_due_ms`` (when an update is due) and ``updater`` has ``fetch`` (None unless a
    metadata request is in flight) and ``maybe_update(now)``. ``conns``: node id -> Link."""

    def __init__(self, hooks, metadata, updater, selector, waker, *, max_in_flight,
                 request_timeout_ms, idle_ms):
        self.hooks, self.metadata, self.updater = hooks, metadata, updater
        self.sel, self.waker = selector, waker
        selector.register(waker.reader, _READ, None)
        self.max_in_flight = int(max_in_flight)
        self.request_timeout_ms = int(request_timeout_ms)
        self.idle_ms = int(idle_ms)
        self.conns = {}
        self.correlation = 0
        self.heads = {}      # (api key, version) -> hooks.request_head(api key, version)
        self.completed = []  # (callback, ClientResponse), run at the end of poll()
        self.next_idle_check = 0
        self.closed = False

    now_ms = staticmethod(now_ms)

    def wakeup(self):
        """Interrupt a blocking poll() (any thread)."""
        self.waker.wakeup()

    # -- the connections --

    def register(self, conn):
        """conn's socket just started connecting: poll it (its Channel's plaintext I/O is the
        Selector's once attached)."""
        self.sel.register(conn.sock, _READ | _WRITE, conn)
        self.sel.set_channel(conn.sock, conn.channel)
        conn.sel_mask = _READ | _WRITE

    def can_send(self, conn):
        """READY, below max in flight, and nothing left half-written (Java's canSendMore)."""
        return (conn is not None and conn.state == READY and not conn.channel.wants_write
                and len(conn.in_flight) < self.max_in_flight)

    def update_due(self, now):
        """A metadata request is due and not in flight: it goes before anything else (Java)."""
        return self.updater.fetch is None and self.metadata.update_due_ms <= now

    def is_ready(self, node_id, now):
        """Can a request go to node_id now?"""
        return not self.update_due(now) and self.can_send(self.conns.get(node_id))

    def sendable_nodes(self, now):
        """The nodes whose connection can take a request now: none while a metadata update
        is due (it goes first, as in Java)."""
        if self.update_due(now):
            return []
        return [node for node, conn in self.conns.items() if self.can_send(conn)]

    def ready_delay(self, node_id):
        """For a READY connection, ms until it can take a request (0, or MAX_DELAY_MS while
        its in-flight limit is reached: a response will wake poll); None if it is not READY."""
        conn = self.conns.get(node_id)
        if conn is None or conn.state != READY:
            return None
        return 0 if self.can_send(conn) else MAX_DELAY_MS

    def busy_nodes(self):
        """The nodes with requests in flight."""
        return {node for node, conn in self.conns.items() if conn.in_flight}

    def in_flight_count(self, node_id=None):
        if node_id is not None:
            conn = self.conns.get(node_id)
            return 0 if conn is None else len(conn.in_flight)
        return sum(len(c.in_flight) for c in self.conns.values())

    def produce_version(self, node_id):
        """The Produce version for node_id's connection, picked once per ApiVersions answer."""
        conn = self.conns[node_id]
        known = conn.produce_version  # (the api versions it was picked from, the version)
        if known is None or known[0] is not conn.api_versions:
            known = conn.produce_version = (conn.api_versions,
                                            self.hooks.api_version(node_id, 0))
        return known[1]

    # -- sending --

    def send_request(self, node_id, api_key, version, body, expects_response, callback,
                     timeout_ms):
        """A request to a node known to be able to take it (sendable_nodes)."""
        return self.enqueue(self.conns[node_id], api_key, version, body, expects_response,
                            callback, timeout_ms, now_ms(), None)

    def enqueue(self, conn, api_key, version, body, expects_response, callback, timeout_ms,
                now, internal):
        """Queue a request on conn and write what the socket takes; returns its correlation
        id. body: bytes-like or a list of them, without header or size."""
        cid = self.correlation
        self.correlation = 0 if cid >= 0x7FFFFFFF else cid + 1
        head = self.heads.get((api_key, version))
        if head is None:  # (before the correlation id, after it, response header version)
            head = self.heads[api_key, version] = self.hooks.request_head(api_key, version)
        parts = _buffers(body)
        prefix = head[0] + cid.to_bytes(4, "big") + head[1]
        size = len(prefix)
        for part in parts:
            size += memoryview(part).nbytes
        req = InFlightRequest(cid, api_key, version, head[2], expects_response, callback, now,
                              timeout_ms, internal)
        conn.enqueue(req, [size.to_bytes(4, "big") + prefix] + parts)
        self.write(conn, now)
        return cid

    def write(self, conn, now):
        """Write what conn's socket takes; a failed write closes the connection."""
        if conn.sock is None:  # closed (or, in the fuzz harness, never opened)
            return
        try:
            done = conn.write(now)
        except KafkaConnectionError as e:
            self.close(conn, e, now)
            return
        self.after_write(conn, done, now)

    def after_write(self, conn, done, now):
        """Complete the requests written that expect no response; poll writability only while
        it matters."""
        for req in done:  # acks=0 style requests complete once written (Java)
            self.complete(conn, req, None, None, now)
        mask = _READ | _WRITE if conn.wants_write else _READ
        if conn.sock is not None and mask != conn.sel_mask:
            self.sel.modify(conn.sock, mask, conn)
            conn.sel_mask = mask

    def complete(self, conn, req, body, error, now):
        if req.callback is not None:
            self.completed.append((req.callback, ClientResponse(
                conn.node_id, req.api_key, req.api_version, req.correlation_id, body, error,
                now - req.send_ms)))

    # -- closing --

    def close(self, conn, error, now, request_update=True):
        """Close conn (conn.close()) and fail its requests; the hooks decide the rest."""
        if conn.sock is not None:
            try:
                self.sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        state = conn.state
        failed = conn.close(error, now)
        error = self.hooks.connection_closed(conn, state, error, failed, now, request_update)
        for req in failed:
            if req.internal is None:
                self.complete(conn, req, None, error, now)

    def shutdown(self):
        """Close every connection, the selector and the waker. Callbacks of requests still in
        flight are not run (the Sender aborts its incomplete batches itself, as Java's does)."""
        if self.closed:
            return
        self.closed = True
        now = now_ms()
        for conn in self.conns.values():
            if conn.sock is not None:
                self.close(conn, None, now, request_update=False)
        self.completed.clear()
        self.sel.close()
        self.waker.close()

    # -- polling --

    def poll(self, timeout_ms):
        """NetworkClient.poll: I/O for up to timeout_ms (None: request_timeout_ms), then the
        callbacks of what completed."""
        if self.closed:
            raise IllegalStateError("NetworkClient is closed")
        now = now_ms()
        for conn in self.conns.values():  # KIP-368: re-authenticate before the session ends
            if conn.reauth_at_ms is not None and conn.state == READY and \
                    now >= conn.reauth_at_ms:
                self.hooks.reauthenticate(conn, now)
        updater = self.updater
        if updater.fetch is not None:
            metadata_timeout = MAX_DELAY_MS  # the response (or its timeout) will wake poll
        else:
            metadata_timeout = max(self.metadata.update_due_ms - now, 0)
            if metadata_timeout <= 0:
                metadata_timeout = updater.maybe_update(now)
        wait = self.request_timeout_ms if timeout_ms is None else timeout_ms
        wait = min(wait, metadata_timeout, self.next_deadline() - now)
        if self.completed:
            wait = 0
        events = self.sel.select_io(min(max(0, wait), _MAX_WAIT_MS) / 1000.0)
        now = now_ms()
        for key, mask in events:
            conn = key.data
            if conn is None:
                self.waker.drain()
            elif conn.sock is not None:
                self.handle_io(conn, mask, now)
        self.handle_timeouts(now)
        if now >= self.next_idle_check:
            self.close_idle(now)
        if self.completed:
            self.run_callbacks()

    def handle_io(self, conn, mask, now):
        state = conn.state
        if state == CONNECTING or state == HANDSHAKING:
            if not self.hooks.set_up(conn, now):
                return
        if conn.channel.direct:  # select_io wrote and read the socket already, without the GIL
            done, frames, error = conn.collect(now)
            self.after_write(conn, done, now)
        else:
            if mask & _WRITE and conn.wants_write:
                self.write(conn, now)
            if not mask & _READ or conn.sock is None:
                return
            frames, error = conn.read(now)
        for frame in frames:
            self.handle_frame(conn, frame, now)
            if conn.sock is None:
                return
        if error is not None:
            self.close(conn, error, now)

    def handle_frame(self, conn, frame, now):
        """One response frame (without its size): matched to the FIFO head, its header
        skipped, then completed (or handed to the client, for its own requests)."""
        req = None
        try:
            if len(frame) < 4:
                self.hooks.response_header_end(frame)  # raises the reader's error
            cid = int.from_bytes(frame[:4], "big", signed=True)
            req = conn.complete_next(cid)
            if req is None:
                return
            pos = 4
            if req.response_header_version >= 1:  # tagged fields: almost always none
                pos = 5 if len(frame) > 4 and frame[4] == 0 else \
                    self.hooks.response_header_end(frame)
        except KafkaError as e:
            if req is not None:  # its header did not decode: it fails with the connection
                conn.in_flight.appendleft(req)
            self.close(conn, e, now)
            return
        body = memoryview(frame)[pos:]
        if req.internal is None:
            self.complete(conn, req, body, None, now)
        else:
            self.hooks.handle_internal(conn, req, body, now)

    def next_deadline(self):
        t = MAX_DELAY_MS
        for conn in self.conns.values():
            if conn.state != DISCONNECTED:
                t = min(t, conn.next_deadline())
        return t

    def handle_timeouts(self, now):
        for conn in list(self.conns.values()):
            if conn.state in SETTING_UP and now >= conn.connect_deadline_ms:
                self.close(conn, KafkaConnectionError(
                    "timed out after %d ms connecting to node %s (%s:%s) in state %s" % (
                        self.request_timeout_ms, conn.node_id, conn.host, conn.port,
                        conn.state)), now)
                continue
            if conn.state == DISCONNECTED or not conn.in_flight:
                continue
            req = conn.expired_request(now)
            if req is not None:
                self.close(conn, RequestTimedOutError(
                    "request (api %d, correlation id %d) to node %s timed out after %d ms; "
                    "closing the connection" % (req.api_key, req.correlation_id, conn.node_id,
                                                now - req.send_ms)), now)

    def close_idle(self, now):
        self.next_idle_check = now + min(_IDLE_CHECK_MS, self.idle_ms)
        for conn in list(self.conns.values()):
            if conn.state == READY and not conn.in_flight and not conn.wants_write and \
                    now - conn.last_activity_ms >= self.idle_ms:
                _log.debug("Closing idle connection to node %s", conn.node_id)
                self.close(conn, None, now, request_update=False)

    def run_callbacks(self):
        done, self.completed = self.completed, []
        for cb, resp in done:
            try:
                cb(resp)
            except Exception:
                _log.exception("Uncaught error in request completion callback %r", cb)
