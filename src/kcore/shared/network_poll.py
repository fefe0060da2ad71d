"""The NetworkClient's data path (Java's NetworkClient.poll with its Selector and
InFlightRequests), the same in both implementations (see kcore/shared/__init__.py).

The NetworkClient (pyprod.network_client) owns the connections and their state; these functions
are its poll(), its request queueing and its response dispatch, written against its attributes
and its BrokerConnections' (state, channel, in_flight, ...), so that a steady produce stream runs
them compiled. What needs a decision stays Python and is called from here only when it is due:
connecting, the TLS handshake and TLS I/O (the ssl object), ApiVersions, SASL, metadata, closing
a connection on an error.
"""
import errno
import logging
import os
import ssl
import sys
import time

from kcore.errors import (CorrelationIdError, IllegalStateError, KafkaConnectionError,
                           KafkaError, RequestTimedOutError)

# kcore exports these names, and the module itself as kcore.network_poll (its functions)
__all__ = ["DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
           "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest",
           "ClientResponse"]

_log = logging.getLogger("kcore.network_poll")

# Connection states (BrokerConnection.state)
DISCONNECTED = "DISCONNECTED"
CONNECTING = "CONNECTING"
HANDSHAKING = "HANDSHAKING"            # TLS handshake
CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
AUTHENTICATING = "AUTHENTICATING"      # SASL exchange (first, or re-authentication)
READY = "READY"
SETTING_UP = (CONNECTING, HANDSHAKING, CHECKING_API_VERSIONS, AUTHENTICATING)
MAX_DELAY_MS = sys.maxsize

_READ, _WRITE = 1, 2                   # selectors.EVENT_READ, EVENT_WRITE
_SSL_SMALL = 4096       # smaller buffers are joined into one TLS write (one record, one syscall)
_SSL_JOIN_MAX = 16384
# ssl errors that mean the peer went away, not that it refused us
_SSL_CLOSED = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
_SSL_WANT = (ssl.SSLWantWriteError, ssl.SSLWantReadError)
_IDLE_CHECK_MS = 1000
_MAX_WAIT_MS = 86_400_000              # select() refuses huge timeouts


def now_ms():
    return int(time.monotonic() * 1000)


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


# -- a connection's in-flight FIFO (Java's InFlightRequests) ---------------------------------

def complete_next(conn, correlation_id):
    """Pop the FIFO head for a response (None for an answer to a request that expected none);
    a mismatch raises CorrelationIdError."""
    in_flight = conn.in_flight
    if correlation_id in conn.unanswered and (
            not in_flight or in_flight[0].correlation_id != correlation_id):
        conn.unanswered.remove(correlation_id)
        return None
    if not in_flight:
        raise CorrelationIdError(
            "node %s sent a response (correlation id %d) with no request in flight" % (
                conn.node_id, correlation_id))
    head = in_flight[0]
    if head.correlation_id != correlation_id or not head.expects_response:
        raise CorrelationIdError(
            "node %s: expected a response to correlation id %d, got %d" % (
                conn.node_id, head.correlation_id, correlation_id))
    return in_flight.popleft()


def wants_write(conn):
    """BrokerConnection.wants_write: the socket's writability matters now."""
    state = conn.state
    if state == HANDSHAKING:
        return conn._hs_wants_write
    return state == CONNECTING or conn.channel.wants_write


def written(conn, tags, now):
    """The frames of tags are fully written: those that expect no response leave the FIFO."""
    conn.last_activity_ms = now
    done = []
    for req in tags:
        if not req.expects_response:
            conn.in_flight.remove(req)
            conn.unanswered.append(req.correlation_id)
            done.append(req)
    return done


def collect(conn, now):
    """After Selector.select_io did conn's I/O: (the requests it finished writing that expect
    no response, the frames it read, the error that ends the connection or None)."""
    channel = conn.channel
    tags, err = channel.take_written()
    done = written(conn, tags, now) if tags else []
    if err:
        return done, [], conn._write_failed(OSError(err, os.strerror(err)))
    frames = []
    try:
        got, eof, err = channel.take_received(frames)
    except KafkaError as e:  # a bad frame size
        return done, frames, conn._receive_failed(e)
    if err:
        return done, frames, conn._receive_failed(OSError(err, os.strerror(err)))
    if got:
        conn.last_activity_ms = now
    if eof:
        return done, frames, conn._receive_failed(None)
    return done, frames, None


# -- a connection's byte streams: plaintext through its Channel, TLS through the ssl object ----

def conn_write(conn, now):
    """BrokerConnection.write: write what the socket takes. Returns the requests now fully
    written that expect no response (they leave the FIFO). Raises KafkaConnectionError."""
    try:
        tags = tls_write(conn) if conn.tls is not None else conn.channel.write(conn.sock)
    except OSError as e:
        if conn.tls is not None:
            raise conn._ssl_failure(e, "write") from e
        raise conn._send_failed(e) from None
    return written(conn, tags, now)


def tls_write(conn):
    tags, channel = [], conn.channel
    while channel.wants_write:
        try:
            n = ssl_send(conn, channel.pending())
        except (BlockingIOError, InterruptedError):
            break
        tags += channel.advance(n)  # (frames with no bytes left complete on 0 too)
        if not n:
            break
    return tags


def ssl_send(conn, iov):
    """Bytes of iov the ssl object took. SSL_write takes a buffer whole or not at all, and a
    write it refused must be offered again unchanged: small buffers are joined, large ones go
    as they are (the encryption is their one copy)."""
    sent, i, tls = 0, 0, conn.tls
    while i < len(iov):
        if conn._ssl_retry is not None:
            count, data = conn._ssl_retry
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
            conn._ssl_retry = (count, data) if count > 1 else None
            if sent:
                return sent
            raise BlockingIOError(errno.EAGAIN, "TLS write would block") from None
        conn._ssl_retry = None
        sent += n
        i += count
    return sent


def conn_read(conn, now, max_reads=32):
    """BrokerConnection.read: read what is available. Returns (frames, error): the complete
    frames (bytes-like, without the size prefix) and None, or the error that ends the
    connection; frames that arrived before the error are still returned."""
    frames = []
    try:
        if conn.tls is not None:
            got, eof = tls_read(conn, frames, max_reads)
        else:
            got, eof = conn.channel.read(conn.sock, frames, max_reads)
    except (KafkaError, OSError) as e:
        return frames, conn._receive_failed(e)
    if got:
        conn.last_activity_ms = now
    if eof:
        return frames, conn._receive_failed(None)
    return frames, None


def tls_read(conn, frames, max_reads):
    """As Channel.read, through the ssl object: it hands out one TLS record per call, so read
    on until it would block."""
    buf, tls, got = conn._tls_rbuf, conn.tls, 0
    size = len(buf)
    for _ in range(max_reads):
        try:
            n = tls.read(size, buf)
        except _SSL_WANT:
            break
        except _SSL_CLOSED:  # (SSLEOFError too: a ragged EOF is an EOF)
            return got, True
        except ssl.SSLError as e:
            raise conn._ssl_failure(e, "read") from e
        if n == 0:
            return got, True
        got += n
        conn.channel.feed(buf, n, frames)
    return got, False


def expired_request(conn, now):
    """The first in-flight request past its timeout, or None."""
    for req in conn.in_flight:
        if now - req.send_ms >= req.timeout_ms:
            return req
    return None


def conn_deadline(conn):
    """Earliest request timeout or connect deadline (ms), MAX_DELAY_MS if none."""
    t = conn.connect_deadline_ms if conn.state != READY else MAX_DELAY_MS
    for req in conn.in_flight:
        t = min(t, req.send_ms + req.timeout_ms)
    return t


# -- sending ---------------------------------------------------------------------------------

def can_send(client, conn):
    """READY, below max in flight, and nothing left half-written (Java's canSendMore)."""
    return (conn is not None and conn.state == READY and not conn.channel.wants_write
            and len(conn.in_flight) < client._max_in_flight)


def time_to_next_update(metadata, now):
    """Metadata.time_to_next_update: 0 if an update is due now; else ms until expiry or the end
    of the refresh backoff."""
    if metadata._need_update:
        expire = 0
    else:
        expire = max(metadata._last_success_ms + metadata.max_age_ms - now, 0)
    return max(expire, max(metadata._last_refresh_ms + metadata.refresh_backoff_ms - now, 0))


def update_due(client, now):
    """A metadata request is due and not in flight: it goes before anything else (Java)."""
    return client._updater._fetch is None and time_to_next_update(client.metadata, now) == 0


def is_ready(client, node_id, now):
    """Can a request go to node_id now?"""
    return not update_due(client, now) and can_send(client, client._conns.get(node_id))


def sendable_nodes(client, now):
    """The nodes whose connection can take a request now: none while a metadata update is due
    (it goes first, as in Java)."""
    if update_due(client, now):
        return []
    return [node for node, conn in client._conns.items() if can_send(client, conn)]


def ready_delay(client, node_id):
    """For a READY connection, ms until it can take a request (0, or MAX_DELAY_MS while its
    in-flight limit is reached: a response will wake poll); None if it is not READY."""
    conn = client._conns.get(node_id)
    if conn is None or conn.state != READY:
        return None
    return 0 if can_send(client, conn) else MAX_DELAY_MS


def produce_version(client, node_id):
    """The Produce version for node_id's connection, picked once per ApiVersions answer."""
    conn = client._conns[node_id]
    known = conn.produce_version  # (the api versions it was picked from, the version)
    if known is None or known[0] is not conn.api_versions:
        known = conn.produce_version = (conn.api_versions, client.api_version(node_id, 0))
    return known[1]


def send_request(client, node_id, api_key, version, body, expects_response, callback,
                 timeout_ms):
    """NetworkClient.send to a node known to be able to take it (sendable_nodes)."""
    return enqueue(client, client._conns[node_id], api_key, version, body, expects_response,
                   callback, timeout_ms, now_ms(), None)


def busy_nodes(client):
    """The nodes with requests in flight."""
    return {node for node, conn in client._conns.items() if conn.in_flight}


def enqueue(client, conn, api_key, version, body, expects_response, callback, timeout_ms, now,
            internal):
    """Queue a request on conn and write what the socket takes; returns its correlation id.
    body: bytes-like or a list of them, without header or size."""
    cid = client._correlation
    client._correlation = 0 if cid >= 0x7FFFFFFF else cid + 1
    head = client._heads.get((api_key, version))
    if head is None:  # (before the correlation id, after it, response header version)
        head = client._request_head(api_key, version)
    if isinstance(body, list):
        parts = body
    elif isinstance(body, (bytes, bytearray, memoryview)):
        parts = [body]
    else:
        parts = client._buffers(body)
    prefix = head[0] + cid.to_bytes(4, "big") + head[1]
    size = len(prefix)
    for part in parts:
        size += memoryview(part).nbytes
    req = InFlightRequest(cid, api_key, version, head[2], expects_response, callback, now,
                          timeout_ms, internal)
    conn.in_flight.append(req)
    conn.channel.enqueue(req, [size.to_bytes(4, "big") + prefix] + parts)
    write(client, conn, now)
    return cid


def write(client, conn, now):
    """Write what conn's socket takes; a failed write closes the connection."""
    if conn.sock is None:  # closed (or, in the fuzz harness, never opened)
        return
    try:
        done = conn_write(conn, now)
    except KafkaConnectionError as e:
        client._close(conn, e, now)
        return
    after_write(client, conn, done, now)


def after_write(client, conn, done, now):
    for req in done:  # acks=0 style requests complete once written (Java)
        complete(client, conn, req, None, None, now)
    mask = _READ | _WRITE if wants_write(conn) else _READ
    if conn.sock is not None and mask != conn.sel_mask:
        client._sel.modify(conn.sock, mask, conn)
        conn.sel_mask = mask


def complete(client, conn, req, body, error, now):
    if req.callback is not None:
        client._completed.append((req.callback, ClientResponse(
            conn.node_id, req.api_key, req.api_version, req.correlation_id, body, error,
            now - req.send_ms)))


# -- polling ---------------------------------------------------------------------------------

def poll(client, timeout_ms):
    """NetworkClient.poll: I/O for up to timeout_ms (None: request_timeout_ms), then the
    callbacks of what completed."""
    if client._closed:
        raise IllegalStateError("NetworkClient is closed")
    now = now_ms()
    for conn in client._conns.values():  # KIP-368: re-authenticate before the session ends
        if conn.reauth_at_ms is not None and conn.state == READY and now >= conn.reauth_at_ms:
            client._reauthenticate(conn, now)
    updater = client._updater
    if updater._fetch is not None:
        metadata_timeout = MAX_DELAY_MS  # the response (or its timeout) will wake poll
    else:
        metadata_timeout = time_to_next_update(client.metadata, now)
        if metadata_timeout <= 0:
            metadata_timeout = updater.maybe_update(now)
    wait = client._request_timeout_ms if timeout_ms is None else timeout_ms
    wait = min(wait, metadata_timeout, next_deadline(client) - now)
    if client._completed:
        wait = 0
    events = client._sel.select_io(min(max(0, wait), _MAX_WAIT_MS) / 1000.0)
    now = now_ms()
    for key, mask in events:
        conn = key.data
        if conn is None:
            drain_wakeups(client)
        elif conn.sock is not None:
            handle_io(client, conn, mask, now)
    handle_timeouts(client, now)
    if now >= client._next_idle_check:
        close_idle(client, now)
    if client._completed:
        run_callbacks(client)


def drain_wakeups(client):
    buf = client._wake_buf
    try:
        while client._recv_into(client._wake_r, buf):  # kcore's: keeps the GIL
            pass
    except (BlockingIOError, InterruptedError):
        pass
    # After draining: a wakeup() between the two leaves a byte, so the next poll returns.
    client._wake_pending = False


def handle_io(client, conn, mask, now):
    state = conn.state
    if state == CONNECTING or state == HANDSHAKING:
        if not client._set_up(conn, now):
            return
    if conn.channel.direct:  # select_io wrote and read the socket already, without the GIL
        done, frames, error = collect(conn, now)
        after_write(client, conn, done, now)
    else:
        if mask & _WRITE and wants_write(conn):
            write(client, conn, now)
        if not mask & _READ or conn.sock is None:
            return
        frames, error = conn_read(conn, now)
    for frame in frames:
        handle_frame(client, conn, frame, now)
        if conn.sock is None:
            return
    if error is not None:
        client._close(conn, error, now)


def handle_frame(client, conn, frame, now):
    """One response frame (without its size): matched to the FIFO head, its header skipped,
    then completed (or handed to the client, for its own requests)."""
    try:
        if len(frame) < 4:
            client._response_header_end(frame)  # raises the reader's error
        cid = int.from_bytes(frame[:4], "big", signed=True)
        req = complete_next(conn, cid)
        if req is None:
            return
        pos = 4
        if req.response_header_version >= 1:  # tagged fields: almost always none
            pos = 5 if len(frame) > 4 and frame[4] == 0 else client._response_header_end(frame)
    except KafkaError as e:
        client._close(conn, e, now)
        return
    body = memoryview(frame)[pos:]
    if req.internal is None:
        complete(client, conn, req, body, None, now)
    else:
        client._handle_internal(conn, req, body, now)


def next_deadline(client):
    t = MAX_DELAY_MS
    for conn in client._conns.values():
        if conn.state != DISCONNECTED:
            t = min(t, conn_deadline(conn))
    return t


def handle_timeouts(client, now):
    for conn in list(client._conns.values()):
        if conn.state in SETTING_UP and now >= conn.connect_deadline_ms:
            client._close(conn, KafkaConnectionError(
                "timed out after %d ms connecting to node %s (%s:%s) in state %s" % (
                    client._request_timeout_ms, conn.node_id, conn.host, conn.port,
                    conn.state)), now)
            continue
        if conn.state == DISCONNECTED or not conn.in_flight:
            continue
        req = expired_request(conn, now)
        if req is not None:
            client._close(conn, RequestTimedOutError(
                "request (api %d, correlation id %d) to node %s timed out after %d ms; "
                "closing the connection" % (req.api_key, req.correlation_id, conn.node_id,
                                            now - req.send_ms)), now)


def close_idle(client, now):
    client._next_idle_check = now + min(_IDLE_CHECK_MS, client._idle_ms)
    for conn in list(client._conns.values()):
        if conn.state == READY and not conn.in_flight and not wants_write(conn) and \
                now - conn.last_activity_ms >= client._idle_ms:
            _log.debug("Closing idle connection to node %s", conn.node_id)
            client._close(conn, None, now, request_update=False)


def run_callbacks(client):
    done, client._completed = client._completed, []
    for cb, resp in done:
        try:
            cb(resp)
        except Exception:
            _log.exception("Uncaught error in request completion callback %r", cb)
