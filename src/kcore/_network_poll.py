"""The NetworkClient's data path (Java's NetworkClient.poll with its Selector and
InFlightRequests), the same in both implementations (see kcore/___init__.py).

NetworkPoll owns it: the Selector and its Waker, every BrokerConnection
(kcore/_broker_connection.py: its state, socket, Channel, in-flight FIFO and TLS byte
stream), the correlation ids and the completed responses. It polls, queues requests,
dispatches responses and times requests out, so that a steady produce stream runs compiled.
What needs a decision goes to its policy (pyprod's ConnectionLifecycle), through its hooks,
only when it is due, with the NetworkPoll as an argument: nothing points back at it.
"""
import logging
import time

from kcore.errors import IllegalStateError, KafkaConnectionError, KafkaError, RequestTimedOutError

if "BrokerConnection" not in globals():  # the pure twin (network_poll.pyx compiles it in)
    from kcore._broker_connection import (CONNECTING, DISCONNECTED, HANDSHAKING,
                                                MAX_DELAY_MS, READY,
                                   SETTING_UP, InFlightRequest)

_log = logging.getLogger("kcore.network_poll")
_READ, _WRITE = 1, 2                   # selectors.EVENT_READ, EVENT_WRITE
_IDLE_CHECK_MS = 1000
_MAX_WAIT_MS = 86_400_000              # select() refuses huge timeouts


def now_ms():
    """The producer's clock: monotonic milliseconds (kcore.now_ms; compiled code reads the
    same clock through kcore/clock.pxd)."""
    return int(time.monotonic() * 1000)


def now_us():
    """The same clock in microseconds: the Sender's loop times linger with it (its ms part is
    now_ms())."""
    return int(time.monotonic() * 1000000)


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
    """The NetworkClient's data path. ``hooks`` is its policy (network_poll.pyi's NetworkHooks:
    pyprod's ConnectionLifecycle), which decides, only when due; it holds no NetworkPoll, so the
    calls that act on the poll pass it first: ``set_up(poll, connection, now)`` (a connection
    CONNECTING or HANDSHAKING became ready: its next setup steps; True if its I/O goes on in
    this poll), ``reauthenticate(poll, connection, now)``, ``connection_closed(poll, connection,
    state, error, failed, now, request_update)`` (after connection.close(): returns the error
    for its failed requests), ``handle_internal(poll, connection, req, body, now)``,
    ``response_header_end(frame)``, ``request_head(api_key, version)`` and
    ``api_version(connection, api_key)``. ``metadata`` has ``update_due_ms`` (when an update is
    due) and ``updater`` has ``fetch`` (None unless a metadata request is in flight) and
    ``maybe_update(poll, now)``. ``connections``: node id -> BrokerConnection."""

    def __init__(self, hooks, metadata, updater, selector, waker, *, max_in_flight,
                 request_timeout_ms, idle_ms):
        self.hooks, self.metadata, self.updater = hooks, metadata, updater
        self.sel, self.waker = selector, waker
        selector.register(waker.reader, _READ, None)
        self.max_in_flight = int(max_in_flight)
        self.request_timeout_ms = int(request_timeout_ms)
        self.idle_ms = int(idle_ms)
        self.connections = {}
        self.correlation = 0
        self.heads = {}      # (api key, version) -> hooks.request_head(api key, version)
        self.completed = []  # (callback, ClientResponse), run at the end of poll()
        self.next_idle_check = 0
        self.closed = False

    now_ms = staticmethod(now_ms)
    now_us = staticmethod(now_us)

    def wakeup(self):
        """Interrupt a blocking poll() (any thread)."""
        self.waker.wakeup()

    # -- the connections --

    def register(self, connection):
        """connection's socket just started connecting: poll it (its Channel's plaintext I/O is the
        Selector's once attached)."""
        self.sel.register(connection.sock, _READ | _WRITE, connection)
        self.sel.set_channel(connection.sock, connection.channel)
        connection.sel_mask = _READ | _WRITE

    def can_send(self, connection):
        """READY, below max in flight, and nothing left half-written (Java's canSendMore)."""
        return (connection is not None and connection.state == READY
                and not connection.channel.wants_write
                and len(connection.in_flight) < self.max_in_flight)

    def update_due(self, now):
        """A metadata request is due and not in flight: it goes before anything else (Java)."""
        return self.updater.fetch is None and self.metadata.update_due_ms <= now

    def is_ready(self, node_id, now):
        """Can a request go to node_id now?"""
        return not self.update_due(now) and self.can_send(self.connections.get(node_id))

    def sendable_nodes(self, now):
        """The nodes whose connection can take a request now: none while a metadata update
        is due (it goes first, as in Java)."""
        if self.update_due(now):
            return []
        return [node for node, connection in self.connections.items() if self.can_send(connection)]

    def ready_delay(self, node_id):
        """For a READY connection, ms until it can take a request (0, or MAX_DELAY_MS while
        its in-flight limit is reached: a response will wake poll); None if it is not READY."""
        connection = self.connections.get(node_id)
        if connection is None or connection.state != READY:
            return None
        return 0 if self.can_send(connection) else MAX_DELAY_MS

    def busy_nodes(self):
        """The nodes with requests in flight."""
        return {node for node, connection in self.connections.items() if connection.in_flight}

    def in_flight_count(self, node_id=None):
        if node_id is not None:
            connection = self.connections.get(node_id)
            return 0 if connection is None else len(connection.in_flight)
        return sum(len(c.in_flight) for c in self.connections.values())

    def produce_version(self, node_id):
        """The Produce version for node_id's connection, picked once per ApiVersions answer."""
        connection = self.connections[node_id]
        known = connection.produce_version  # (the api versions it was picked from, the version)
        if known is None or known[0] is not connection.api_versions:
            known = connection.produce_version = (connection.api_versions,
                                            self.hooks.api_version(connection, 0))
        return known[1]

    # -- sending --

    def send_request(self, node_id, api_key, version, body, expects_response, callback,
                     timeout_ms):
        """A request to a node known to be able to take it (sendable_nodes)."""
        return self.enqueue(self.connections[node_id], api_key, version, body, expects_response,
                            callback, timeout_ms, now_ms(), None)

    def enqueue(self, connection, api_key, version, body, expects_response, callback, timeout_ms,
                now, internal):
        """Queue a request on connection and write what the socket takes; returns its correlation
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
        connection.enqueue(req, [size.to_bytes(4, "big") + prefix] + parts)
        self.write(connection, now)
        return cid

    def write(self, connection, now):
        """Write what connection's socket takes; a failed write closes the connection."""
        if connection.sock is None:  # closed (or, in the fuzz harness, never opened)
            return
        try:
            done = connection.write(now)
        except KafkaConnectionError as e:
            self.close(connection, e, now)
            return
        self.after_write(connection, done, now)

    def after_write(self, connection, done, now):
        """Complete the requests written that expect no response; poll writability only while
        it matters."""
        for req in done:  # acks=0 style requests complete once written (Java)
            self.complete(connection, req, None, None, now)
        mask = _READ | _WRITE if connection.wants_write else _READ
        if connection.sock is not None and mask != connection.sel_mask:
            self.sel.modify(connection.sock, mask, connection)
            connection.sel_mask = mask

    def complete(self, connection, req, body, error, now):
        if req.callback is not None:
            self.completed.append((req.callback, ClientResponse(
                connection.node_id, req.api_key, req.api_version, req.correlation_id, body, error,
                now - req.send_ms)))

    # -- closing --

    def close(self, connection, error, now, request_update=True):
        """Close connection (connection.close()), fail its requests; the hooks decide the rest."""
        if connection.sock is not None:
            try:
                self.sel.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
        state = connection.state
        failed = connection.close(error, now)
        error = self.hooks.connection_closed(self, connection, state, error, failed, now,
                                             request_update)
        for req in failed:
            if req.internal is None:
                self.complete(connection, req, None, error, now)

    def precise_timers(self):
        """The calling thread's (the Sender's) timed polls end on time
        (Selector.precise_timers); True if set."""
        return self.sel.precise_timers()

    def shutdown(self, after_fork=False):
        """Close every connection, the selector and the waker. Callbacks of requests still in
        flight are not run (the Sender aborts its incomplete batches itself, as Java's does).
        after_fork, in a forked child: close only this process's descriptors, writing nothing
        (no shutdown(): the parent still uses the connections) and calling no hook; the
        requests in flight and the responses not yet handled are the parent's."""
        if self.closed:
            return
        self.closed = True
        now = now_ms()
        for connection in self.connections.values():
            if after_fork:
                connection.close(None, now)
            elif connection.sock is not None:
                self.close(connection, None, now, request_update=False)
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
        # KIP-368: re-authenticate before the session ends
        for connection in self.connections.values():
            if connection.reauth_at_ms is not None and connection.state == READY and \
                    now >= connection.reauth_at_ms:
                self.hooks.reauthenticate(self, connection, now)
        updater = self.updater
        if updater.fetch is not None:
            metadata_timeout = MAX_DELAY_MS  # the response (or its timeout) will wake poll
        else:
            metadata_timeout = max(self.metadata.update_due_ms - now, 0)
            if metadata_timeout <= 0:
                metadata_timeout = updater.maybe_update(self, now)
        wait = self.request_timeout_ms if timeout_ms is None else timeout_ms
        wait = min(wait, metadata_timeout, self.next_deadline() - now)
        if self.completed:
            wait = 0
        events = self.sel.select_io(min(max(0, wait), _MAX_WAIT_MS) / 1000.0)
        now = now_ms()
        for key, mask in events:
            connection = key.data
            if connection is None:
                self.waker.drain()
            elif connection.sock is not None:
                self.handle_io(connection, mask, now)
        self.handle_timeouts(now)
        if now >= self.next_idle_check:
            self.close_idle(now)
        if self.completed:
            self.run_callbacks()

    def handle_io(self, connection, mask, now):
        state = connection.state
        if state == CONNECTING or state == HANDSHAKING:
            if not self.hooks.set_up(self, connection, now):
                return
        if connection.channel.direct:  # select_io wrote and read the socket, without the GIL
            done, frames, error = connection.collect(now)
            self.after_write(connection, done, now)
        else:
            if mask & _WRITE and connection.wants_write:
                self.write(connection, now)
            if not mask & _READ or connection.sock is None:
                return
            frames, error = connection.read(now)
        for frame in frames:
            self.handle_frame(connection, frame, now)
            if connection.sock is None:
                return
        if error is not None:
            self.close(connection, error, now)

    def handle_frame(self, connection, frame, now):
        """One response frame (without its size): matched to the FIFO head, its header
        skipped, then completed (or handed to the client, for its own requests)."""
        req = None
        try:
            if len(frame) < 4:
                self.hooks.response_header_end(frame)  # raises the reader's error
            cid = int.from_bytes(frame[:4], "big", signed=True)
            req = connection.complete_next(cid)
            if req is None:
                return
            pos = 4
            if req.response_header_version >= 1:  # tagged fields: almost always none
                pos = 5 if len(frame) > 4 and frame[4] == 0 else \
                    self.hooks.response_header_end(frame)
        except KafkaError as e:
            if req is not None:  # its header did not decode: it fails with the connection
                connection.in_flight.appendleft(req)
            self.close(connection, e, now)
            return
        body = memoryview(frame)[pos:]
        if req.internal is None:
            self.complete(connection, req, body, None, now)
        else:
            self.hooks.handle_internal(self, connection, req, body, now)

    def next_deadline(self):
        t = MAX_DELAY_MS
        for connection in self.connections.values():
            if connection.state != DISCONNECTED:
                t = min(t, connection.next_deadline())
        return t

    def handle_timeouts(self, now):
        for connection in list(self.connections.values()):
            setting_up = connection.state in SETTING_UP
            if setting_up and now >= connection.connect_deadline_ms:
                self.close(connection, KafkaConnectionError(
                    "timed out after %d ms connecting to node %s (%s:%s) in state %s" % (
                        now - connection.last_attempt_ms, connection.node_id, connection.host,
                        connection.port,
                        connection.state)), now)
                continue
            if connection.state == DISCONNECTED or not connection.in_flight:
                continue
            req = connection.expired_request(now)
            if req is not None and setting_up:  # ApiVersions or SASL unanswered: no connection
                self.close(connection, KafkaConnectionError(
                    "timed out after %d ms connecting to node %s (%s:%s) in state %s: no answer "
                    "to request api %d" % (now - req.send_ms, connection.node_id, connection.host,
                                          connection.port, connection.state, req.api_key)), now)
            elif req is not None:
                self.close(connection, RequestTimedOutError(
                    "request (api %d, correlation id %d) to node %s timed out after %d ms; "
                    "closing the connection" % (req.api_key, req.correlation_id, connection.node_id,
                                                now - req.send_ms)), now)

    def close_idle(self, now):
        self.next_idle_check = now + min(_IDLE_CHECK_MS, self.idle_ms)
        for connection in list(self.connections.values()):
            if connection.state == READY and not connection.in_flight and \
                    not connection.wants_write and \
                    now - connection.last_activity_ms >= self.idle_ms:
                _log.debug("Closing idle connection to node %s", connection.node_id)
                self.close(connection, None, now, request_update=False)

    def run_callbacks(self):
        done, self.completed = self.completed, []
        for cb, resp in done:
            try:
                cb(resp)
            except Exception:
                _log.exception("Uncaught error in request completion callback %r", cb)
