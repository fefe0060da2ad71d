"""NetworkClient: Java's NetworkClient, in one thread (the Sender's).

The data path is kcore's NetworkPoll (``client.network_poll``), compiled: it holds the
connections (kcore BrokerConnections), the selector and the completed responses; callers poll,
wake it up (any thread) and count what is in flight there. Its poll() select()s on every broker
socket plus a wakeup socketpair, does the IO, expires requests (a timed-out request closes its
connection, failing everything in flight on it), keeps the metadata fresh
(metadata_updater.py), then runs the response callbacks, and calls this class (its hooks, the
policy: network_poll.pyi's NetworkHooks) for what needs a decision. This class keeps the
connections' setup (with each connection's ConnectionSetup: TCP, SOCKS5, TLS; then ApiVersions,
SASL, metadata) and its Python API. Times are monotonic ms (kcore.now_ms). Whatever a broker
sends ends as a typed error: a reply that does not decode is a KafkaProtocolError that closes
its connection, with backoff.

A connection is set up in steps: TCP connect, the TLS handshake (SSL, SASL_SSL), ApiVersions,
the SASL exchange (SASL_*; SaslClientAuthenticator), then READY. When the broker limits the SASL
session (KIP-368), the connection authenticates again before it expires: it stops taking new
requests, and its in-flight ones complete as usual. A refused authentication is fatal for the
waits on metadata (Java's fatal metadata error) and fails the batches bound for that node.
"""
import logging
import random

from kcore import NetworkPoll, Selector, Waker
from pyprod import errors, node_api_versions
from pyprod.connection import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED,
                               HANDSHAKING, MAX_DELAY_MS, READY, SETTING_UP, ExponentialBackoff,
                               decoded, new_connection)
from pyprod.metadata import now_ms
from pyprod.metadata_updater import MetadataUpdater
from pyprod.protocol import BY_KEY, api_versions, header, produce
from pyprod.protocol.wire import Reader, Writer

log = logging.getLogger(__name__)

__all__ = ["NetworkClient", "DISCONNECTED", "CONNECTING", "HANDSHAKING",
           "CHECKING_API_VERSIONS", "AUTHENTICATING", "READY", "MAX_DELAY_MS",
           "is_authentication_failure"]

_INTERNAL_API_VERSIONS = "api_versions"
_PRODUCE_TXN_V2 = 12  # Produce v12: v11 on the wire, the partition joins the transaction
_INTERNAL_METADATA = "metadata"
_INTERNAL_SASL = "sasl"


def is_authentication_failure(error):
    """A refused TLS handshake or SASL exchange, or a broker too old for the SASL the settings
    ask (UnsupportedVersionError, while connecting): retrying it as it is cannot help."""
    return isinstance(error, (errors.AuthenticationFailedError, errors.UnsupportedVersionError,
                              errors.UnsupportedSaslMechanismError, errors.IllegalSaslStateError))


def _api_module(api_key):
    module = BY_KEY.get(api_key)
    if module is None:
        raise errors.UnsupportedVersionError("pyprod does not implement API key %r" % (api_key,))
    return module


class NetworkClient:
    def __init__(self, metadata, *, client_id, request_timeout_ms,
                 max_in_flight_requests_per_connection, connections_max_idle_ms,
                 reconnect_backoff_ms, reconnect_backoff_max_ms, receive_message_max_bytes,
                 socket_options=(), ssl_context=None, sasl_authenticator=None,
                 allow_auto_create_topics=True, connection_options=None):
        """``sasl_authenticator(host, node_id)`` makes a connection's SaslClientAuthenticator
        (None: no SASL); ``ssl_context`` wraps every socket (None: plaintext);
        ``connection_options``: more ConnectionSetup settings (connection.connection_settings)."""
        self.metadata = metadata
        self._client_id = client_id
        self._request_timeout_ms = int(request_timeout_ms)
        self.reconnect_backoff_ms = int(reconnect_backoff_ms)
        self._backoff = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._connection_options = dict(socket_options=socket_options, ssl_context=ssl_context,
                                        receive_message_max_bytes=receive_message_max_bytes,
                                        **(connection_options or {}))
        self._sasl = sasl_authenticator
        self._updater = MetadataUpdater(self, metadata, _INTERNAL_METADATA,
                                        allow_auto_create_topics)
        # the data path: the connections (node_id -> kcore BrokerConnection, kept across
        # reconnects), the selector, the in-flight requests, the completed responses; callers
        # poll, wake it up and count what is in flight there
        self.network_poll = NetworkPoll(self, metadata, self._updater, Selector(), Waker(),
                                        max_in_flight=max_in_flight_requests_per_connection,
                                        request_timeout_ms=request_timeout_ms,
                                        idle_ms=connections_max_idle_ms)
        self._connections = self.network_poll.connections
        self._features = (-1, {})  # (finalized features epoch, {name: level}), the newest seen
        self._produce_v12 = False

    # -- connection state --

    def _connection_for(self, node_id):
        """The node's connection object, created from the current metadata; None if unknown."""
        connection = self._connections.get(node_id)
        broker = self.metadata.cluster.broker_metadata(node_id)
        if connection is None:
            if broker is None:
                return None
            connection = self._connections[node_id] = new_connection(
                node_id, broker.host, broker.port, backoff=self._backoff,
                **self._connection_options)
        elif broker is not None and connection.state == DISCONNECTED and \
                (connection.host, connection.port) != (broker.host, broker.port):
            connection.setup.readdress(connection, broker.host, broker.port)
        return connection

    def ready(self, node_id, now):
        """NetworkPoll.is_ready() (False while a metadata update is due: it goes first, as in
        Java), and if the node is disconnected and its backoff passed, start connecting."""
        if self.network_poll.is_ready(node_id, now):
            return True
        connection = self._connection_for(node_id)
        if connection is not None and connection.setup.can_connect(connection, now):
            self._initiate_connect(connection, now)
        return False

    def connection_delay(self, node_id, now):
        """ms to wait before node_id is worth checking: the remaining reconnect backoff if
        disconnected, 0 if READY with room for a request, MAX_DELAY_MS while connecting or
        while its in-flight limit is reached (a response or the connection will wake poll)."""
        connection = self._connections.get(node_id)
        if connection is None:
            return 0
        if connection.state == READY and not self.network_poll.can_send(connection):
            return MAX_DELAY_MS
        return connection.setup.connection_delay(connection, now)

    def is_connection_failed(self, node_id):
        connection = self._connections.get(node_id)
        return (connection is not None and connection.state == DISCONNECTED
                and connection.error is not None)

    def connection_state(self, node_id):
        connection = self._connections.get(node_id)
        return DISCONNECTED if connection is None else connection.state

    def connection_error(self, node_id):
        """Why node_id's connection last closed (None if it never failed)."""
        connection = self._connections.get(node_id)
        return None if connection is None else connection.error

    def authentication_error(self, node_id):
        """The error of node_id's last connection if the broker refused its authentication (or
        we refused the broker's certificate), while it is disconnected; else None."""
        connection = self._connections.get(node_id)
        if connection is None or connection.state != DISCONNECTED or \
                not is_authentication_failure(connection.error):
            return None
        return connection.error

    def connection(self, node_id):
        """The node's kcore BrokerConnection (diagnostics and tests), or None."""
        return self._connections.get(node_id)

    def connected_nodes(self):
        return [n for n, connection in self._connections.items() if connection.state == READY]

    def bootstrap_connected(self):
        """True once metadata was fetched or some broker connection is READY."""
        return self.metadata.version > 0 or any(
            connection.state == READY for connection in self._connections.values())

    def least_loaded_node(self, now):
        """Java's rule: a READY node with nothing in flight at once, else the READY node with
        the fewest in flight, else one connecting, else the connectable node tried longest ago.
        Never a node in reconnect backoff. None if there is no such node."""
        nodes = self.metadata.cluster.node_ids()
        if not nodes:
            return None
        found_ready = found_connecting = found_can_connect = None
        least = MAX_DELAY_MS
        can_connect_at = None
        offset = random.randrange(len(nodes))
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            connection = self._connections.get(node)
            if self.network_poll.can_send(connection):
                n = len(connection.in_flight)
                if n == 0:
                    return node
                if n < least:
                    least, found_ready = n, node
            elif connection is not None and connection.state in SETTING_UP:
                found_connecting = node
            elif connection is None or connection.setup.can_connect(connection, now):
                last = -MAX_DELAY_MS if connection is None else connection.last_attempt_ms
                if found_can_connect is None or last < can_connect_at:
                    found_can_connect, can_connect_at = node, last
        if found_ready is not None:
            return found_ready
        return found_connecting if found_connecting is not None else found_can_connect

    def api_version(self, node_id, api_key):
        """Highest version of api_key both pyprod and node_id support."""
        connection = self._connections.get(node_id)
        if connection is None or connection.api_versions is None:
            raise errors.IllegalStateError("node %s has no negotiated API versions "
                                           "(not connected)" % (node_id,))
        version = api_versions.pick_version(_api_module(api_key), connection.api_versions)
        if api_key == produce.API_KEY and self._produce_v12 and \
                connection.api_versions[api_key][1] >= _PRODUCE_TXN_V2:
            return _PRODUCE_TXN_V2
        return version

    def transaction_version(self):
        """The brokers' finalized transaction.version (KIP-890): 2+ for transactions v2."""
        return self._features[1].get("transaction.version", 0)

    def use_transaction_v2(self, enabled):
        """Produce v12 (transactions v2: it adds the partition to the transaction) or at
        most v11; switched between transactions only, on the Sender thread."""
        if enabled != self._produce_v12:
            self._produce_v12 = enabled
            for connection in self._connections.values():
                connection.forget_produce_version()

    def broker_api_versions(self, node_id):
        """{api_key: (min, max)} the broker announced, or None."""
        connection = self._connections.get(node_id)
        if connection is None or connection.api_versions is None:
            return None
        return dict(connection.api_versions)

    # -- connecting --

    def _initiate_connect(self, connection, now):
        log.debug("Connecting to node %s at %s:%s", connection.node_id, connection.host,
                  connection.port)
        try:
            connection.setup.connect(connection, now, self._request_timeout_ms)
        except errors.KafkaConnectionError as e:
            self.network_poll.close(connection, e, now)
            return
        self.network_poll.register(connection)

    def set_up(self, connection, now):
        """poll() found a connection CONNECTING or HANDSHAKING ready: its next setup steps.
        True if it is set up enough for its I/O to go on in this poll."""
        if connection.state == CONNECTING:
            self._on_connected(connection, now)
            if connection.sock is None:
                return False
        if connection.state == HANDSHAKING:
            self._handshake(connection, now)
            if connection.state == HANDSHAKING or connection.sock is None:
                return False
        return True

    def _on_connected(self, connection, now):
        try:
            connection.setup.finish_connect(connection, now)
        except errors.KafkaConnectionError as e:
            self.network_poll.close(connection, e, now)
            return
        if connection.state == HANDSHAKING:
            self._handshake(connection, now)
        else:
            self._send_api_versions(connection, node_api_versions.FIRST_VERSION, now)

    def _handshake(self, connection, now):
        try:
            done = connection.setup.handshake(connection, now)
        except errors.KafkaConnectionError as e:
            self.network_poll.close(connection, e, now)
            return
        if done:
            log.debug("Node %s: %s", connection.node_id,
                      connection.setup.handshake_summary(connection))
            self._send_api_versions(connection, node_api_versions.FIRST_VERSION, now)
        else:
            # poll writability only while it matters
            self.network_poll.after_write(connection, (), 0)

    # -- SASL (SaslClientAuthenticator drives it; these send and route its requests) --

    def _start_authentication(self, connection, now, api_versions=None):
        """-> AUTHENTICATING: with the ApiVersions just negotiated, or (re-authentication) the
        connection's."""
        if api_versions is None:
            api_versions = connection.api_versions
        connection.start_authentication(api_versions, now + self._request_timeout_ms)
        authenticator = connection.setup.authenticator = self._sasl(connection.host,
                                                                    connection.node_id)
        try:
            request = authenticator.start(connection.api_versions)
        except errors.KafkaError as e:
            self.network_poll.close(connection, e, now)
            return
        self._send_sasl(connection, request, now)

    def _send_sasl(self, connection, request, now):
        api_key, version, body = request
        self.network_poll.enqueue(connection, api_key, version, body, True, None,
                                  self._request_timeout_ms, now, _INTERNAL_SASL)

    def _handle_sasl(self, connection, req, body, now):
        authenticator = connection.setup.authenticator
        try:
            request = decoded("a SASL response", authenticator.on_response, req.api_key,
                              req.api_version, body)
        except errors.KafkaError as e:
            self.network_poll.close(connection, e, now)
            return
        if request is not None:
            self._send_sasl(connection, request, now)
            return
        reauth_at_ms = authenticator.reauth_at(now)
        log.debug("Node %s: SASL %s authentication done%s", connection.node_id,
                  authenticator.mechanism_name, "" if reauth_at_ms is None else
                  ", session of %d ms" % authenticator.session_lifetime_ms)
        connection.setup.authenticator = None
        connection.set_ready(connection.api_versions, reauth_at_ms)

    def reauthenticate(self, connection, now):
        """KIP-368: a READY connection whose SASL session nears its end authenticates again."""
        log.debug("Node %s: re-authenticating (SASL session ends soon)", connection.node_id)
        self._start_authentication(connection, now)

    def _send_api_versions(self, connection, version, now):
        self.network_poll.enqueue(connection, api_versions.API_KEY, version,
                                  api_versions.encode_request(version), True, None,
                                  self._request_timeout_ms, now, _INTERNAL_API_VERSIONS)

    def _handle_api_versions(self, connection, req, body, now):
        try:
            retry, ranges, features = node_api_versions.negotiate(connection.node_id,
                                                                  req.api_version, body)
        except errors.KafkaError as e:
            self.network_poll.close(connection, e, now)
            return
        if retry is not None:
            self._send_api_versions(connection, retry, now)
            return
        if features[0] >= self._features[0]:  # the newest the brokers finalized (Java)
            self._features = features
        if self._sasl is not None:
            self._start_authentication(connection, now, ranges)
            return
        connection.set_ready(ranges)
        log.debug("Node %s is READY (ApiVersions v%d)", connection.node_id, req.api_version)

    # -- sending --

    def send(self, node_id, api_key, api_version, body, expects_response=True, callback=None,
             timeout_ms=None):
        """Queue a request (body: bytes-like or a list of them, without header or size); the
        client adds both. Returns the correlation id. callback(ClientResponse) runs in poll();
        for expects_response=False it runs once the bytes are written."""
        connection = self._connections.get(node_id)
        if not self.network_poll.can_send(connection):
            raise errors.IllegalStateError(
                "Attempt to send a request to node %s which is not ready" % (node_id,))
        module = _api_module(api_key)
        module.API.check(api_version)
        now = now_ms()
        return self.network_poll.enqueue(
            connection, api_key, api_version, body, expects_response, callback,
            self._request_timeout_ms if timeout_ms is None else timeout_ms, now, None)

    def request_head(self, api_key, version):
        """(request header before the correlation id, after it, response header version) for
        an API and version (NetworkPoll caches it)."""
        api = _api_module(api_key).API
        w = Writer()  # key, version | correlation id | client id (and tagged fields)
        header.write_request_header(w, api, version, 0, self._client_id)
        head = w.getvalue()
        return head[:4], head[8:], header.response_header_version(api, version)

    # -- closing --

    def connection_closed(self, connection, state, error, failed, now, request_update):
        """NetworkPoll's hook, once connection closed (it was in ``state``): its setup's
        backoff, log, decide, and return the error its failed requests (``failed``) complete
        with."""
        connection.setup.closed(connection, state != DISCONNECTED)
        if error is not None:
            log.info("Node %s (%s:%s) disconnected%s: %s", connection.node_id, connection.host,
                     connection.port, " while %s" % state.lower() if state != READY else "",
                     error)
        if is_authentication_failure(error):
            log.error("Node %s (%s:%s): %s", connection.node_id, connection.host,
                      connection.port, error)
            self.metadata.set_fatal_error(error)
        if failed and error is not None and not error.retriable:
            # e.g. a bogus frame size: the requests themselves only lost their connection
            cause, error = error, errors.KafkaConnectionError(
                "connection to node %s closed: %s" % (connection.node_id, error))
            error.__cause__ = cause
        for req in failed:
            if req.internal == _INTERNAL_METADATA:
                self._updater.request_failed(now)
        if request_update:
            if self._updater.update_due(now):  # Java: treat as a failed update, to back off
                self.metadata.failed_update(now)
            self.metadata.request_update()  # the disconnect may come from stale metadata
        return error

    def close_node(self, node_id):
        connection = self._connections.get(node_id)
        if connection is not None and connection.state != DISCONNECTED:
            self.network_poll.close(connection, errors.KafkaConnectionError(
                "closed by the client"), now_ms(), request_update=False)

    # -- for MetadataUpdater --

    def any_setting_up(self):
        return any(connection.state in SETTING_UP for connection in self._connections.values())

    def connect_if_allowed(self, node_id, now):
        """Start connecting to node_id if it is disconnected past its backoff; True if so."""
        connection = self._connection_for(node_id)
        if connection is None or not connection.setup.can_connect(connection, now):
            return False
        self._initiate_connect(connection, now)
        return True

    def send_internal(self, connection, api_key, version, body, now, tag):
        """A request the client handles itself (tag: InFlightRequest.internal)."""
        self.network_poll.enqueue(connection, api_key, version, body, True, None,
                                  self._request_timeout_ms, now, tag)

    def drop_bootstrap_connections(self, cluster, now):
        """Real metadata arrived: close the bootstrap connections it does not name."""
        for node_id, connection in list(self._connections.items()):
            if node_id < 0 and cluster.broker_metadata(node_id) is None:
                if not connection.in_flight and connection.sock is not None:
                    self.network_poll.close(connection, None, now, request_update=False)
                if connection.state == DISCONNECTED:
                    del self._connections[node_id]

    # -- NetworkPoll's hooks (network_poll.pyi's NetworkHooks; set_up, reauthenticate and
    # connection_closed are above) --

    def response_header_end(self, frame):
        """Where a response's body starts, past its correlation id and tagged fields;
        KafkaError if the header does not decode."""
        r = Reader(frame)
        r.read_int32()
        decoded("a response header", r.read_tagged_fields)
        return r.pos

    def handle_internal(self, connection, req, body, now):
        """The response to a request the client sent itself."""
        if req.internal == _INTERNAL_API_VERSIONS:
            self._handle_api_versions(connection, req, body, now)
        elif req.internal == _INTERNAL_METADATA:
            self._updater.handle_response(connection, req, body, now)
        elif req.internal == _INTERNAL_SASL:
            self._handle_sasl(connection, req, body, now)

