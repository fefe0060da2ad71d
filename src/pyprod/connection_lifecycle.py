"""ConnectionLifecycle: NetworkPoll's policy (network_poll.pyi's NetworkHooks), named for what it
decides: a broker connection's life, from making and connecting it to its close.

A connection is set up in steps: TCP connect (with its ConnectionSetup: TCP, SOCKS5, TLS), the
TLS handshake (SSL, SASL_SSL), ApiVersions, the SASL exchange (SASL_*; SaslClientAuthenticator),
then READY. When the broker limits the SASL session (KIP-368), the connection authenticates again
before it expires: it stops taking new requests, and its in-flight ones complete as usual. A
refused authentication is fatal for the waits on metadata (Java's fatal metadata error) and fails
the batches bound for that node. It also picks the least loaded node and the API versions.

It holds no NetworkPoll: every call that needs one gets it as its first argument, so the
references go one way (NetworkClient -> NetworkPoll -> ConnectionLifecycle, and
NetworkPoll -> MetadataUpdater -> ConnectionLifecycle; the updater is reached as
``poll.updater``). Times are monotonic ms (kcore.now_ms).
"""
import logging
import random

from pyprod import errors, node_api_versions
from pyprod.connection import (CONNECTING, DISCONNECTED, HANDSHAKING, MAX_DELAY_MS, READY,
                               SETTING_UP, ExponentialBackoff, decoded, new_connection)
from pyprod.protocol import BY_KEY, api_versions, header, produce
from pyprod.protocol.wire import Reader, Writer

log = logging.getLogger("pyprod.network_client")

__all__ = ["ConnectionLifecycle", "is_authentication_failure", "api_module",
           "INTERNAL_API_VERSIONS", "INTERNAL_METADATA", "INTERNAL_SASL"]

# InFlightRequest.internal of the requests the client sends and handles itself
INTERNAL_API_VERSIONS = "api_versions"
INTERNAL_METADATA = "metadata"
INTERNAL_SASL = "sasl"
_PRODUCE_TXN_V2 = 12  # Produce v12: v11 on the wire, the partition joins the transaction


def is_authentication_failure(error):
    """A refused TLS handshake or SASL exchange, or a broker too old for the SASL the settings
    ask (UnsupportedVersionError, while connecting): retrying it as it is cannot help."""
    return isinstance(error, (errors.AuthenticationFailedError, errors.UnsupportedVersionError,
                              errors.UnsupportedSaslMechanismError, errors.IllegalSaslStateError))


def api_module(api_key):
    module = BY_KEY.get(api_key)
    if module is None:
        raise errors.UnsupportedVersionError("pyprod does not implement API key %r" % (api_key,))
    return module


class ConnectionLifecycle:
    def __init__(self, metadata, *, client_id, request_timeout_ms, reconnect_backoff_ms,
                 reconnect_backoff_max_ms, connection_options, sasl_authenticator=None):
        """``connection_options``: each new connection's ConnectionSetup settings;
        ``sasl_authenticator(host, node_id)`` makes a SaslClientAuthenticator (None: no SASL)."""
        self.metadata = metadata
        self._client_id = client_id
        self._request_timeout_ms = int(request_timeout_ms)
        self.reconnect_backoff_ms = int(reconnect_backoff_ms)
        self._backoff = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._connection_options = connection_options
        self._sasl = sasl_authenticator
        self.features = (-1, {})  # (finalized features epoch, {name: level}), the newest seen
        self.produce_v12 = False  # transactions v2: Produce v12 (use_transaction_v2)

    # -- making and connecting connections --

    def connection_for(self, poll, node_id):
        """The node's connection object, created from the current metadata; None if unknown."""
        connection = poll.connections.get(node_id)
        broker = self.metadata.cluster.broker_metadata(node_id)
        if connection is None:
            if broker is None:
                return None
            connection = poll.connections[node_id] = new_connection(
                node_id, broker.host, broker.port, backoff=self._backoff,
                **self._connection_options)
        elif broker is not None and connection.state == DISCONNECTED and \
                (connection.host, connection.port) != (broker.host, broker.port):
            connection.setup.readdress(connection, broker.host, broker.port)
        return connection

    def connect_if_allowed(self, poll, node_id, now):
        """Start connecting to node_id if it is disconnected past its backoff; True if so."""
        connection = self.connection_for(poll, node_id)
        if connection is None or not connection.setup.can_connect(connection, now):
            return False
        log.debug("Connecting to node %s at %s:%s", connection.node_id, connection.host,
                  connection.port)
        try:
            connection.setup.connect(connection, now, self._request_timeout_ms)
        except errors.KafkaConnectionError as e:
            poll.close(connection, e, now)
            return True
        poll.register(connection)
        return True

    def connection_delay(self, poll, node_id, now):
        """ms to wait before node_id is worth checking: the remaining reconnect backoff if
        disconnected, 0 if READY with room for a request, MAX_DELAY_MS while connecting or
        while its in-flight limit is reached (a response or the connection will wake poll)."""
        connection = poll.connections.get(node_id)
        if connection is None:
            return 0
        if connection.state == READY and not poll.can_send(connection):
            return MAX_DELAY_MS
        return connection.setup.connection_delay(connection, now)

    def least_loaded_node(self, poll, now):
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
            connection = poll.connections.get(node)
            if poll.can_send(connection):
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

    # -- the setup steps (NetworkHooks.set_up, reauthenticate) --

    def set_up(self, poll, connection, now):
        """poll() found a connection CONNECTING or HANDSHAKING ready: its next setup steps.
        True if it is set up enough for its I/O to go on in this poll."""
        if connection.state == CONNECTING:
            self._on_connected(poll, connection, now)
            if connection.sock is None:
                return False
        if connection.state == HANDSHAKING:
            self._handshake(poll, connection, now)
            if connection.state == HANDSHAKING or connection.sock is None:
                return False
        return True

    def _on_connected(self, poll, connection, now):
        try:
            connection.setup.finish_connect(connection, now)
        except errors.KafkaConnectionError as e:
            poll.close(connection, e, now)
            return
        if connection.state == HANDSHAKING:
            self._handshake(poll, connection, now)
        else:
            self._send_api_versions(poll, connection, node_api_versions.FIRST_VERSION, now)

    def _handshake(self, poll, connection, now):
        try:
            done = connection.setup.handshake(connection, now)
        except errors.KafkaConnectionError as e:
            poll.close(connection, e, now)
            return
        if done:
            log.debug("Node %s: %s", connection.node_id,
                      connection.setup.handshake_summary(connection))
            self._send_api_versions(poll, connection, node_api_versions.FIRST_VERSION, now)
        else:
            poll.after_write(connection, (), 0)  # poll writability only while it matters

    def _send_internal(self, poll, connection, request, now, tag):
        api_key, version, body = request
        poll.enqueue(connection, api_key, version, body, True, None, self._request_timeout_ms,
                     now, tag)

    def _send_api_versions(self, poll, connection, version, now):
        self._send_internal(poll, connection, (api_versions.API_KEY, version,
                                               api_versions.encode_request(version)),
                            now, INTERNAL_API_VERSIONS)

    def _handle_api_versions(self, poll, connection, req, body, now):
        try:
            retry, ranges, features = node_api_versions.negotiate(connection.node_id,
                                                                  req.api_version, body)
        except errors.KafkaError as e:
            poll.close(connection, e, now)
            return
        if retry is not None:
            self._send_api_versions(poll, connection, retry, now)
            return
        if features[0] >= self.features[0]:  # the newest the brokers finalized (Java)
            self.features = features
        if self._sasl is not None:
            self._start_authentication(poll, connection, now, ranges)
            return
        connection.set_ready(ranges)
        log.debug("Node %s is READY (ApiVersions v%d)", connection.node_id, req.api_version)

    # SASL: SaslClientAuthenticator drives it; these send and route its requests

    def _start_authentication(self, poll, connection, now, api_versions=None):
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
            poll.close(connection, e, now)
            return
        self._send_internal(poll, connection, request, now, INTERNAL_SASL)

    def _handle_sasl(self, poll, connection, req, body, now):
        authenticator = connection.setup.authenticator
        try:
            request = decoded("a SASL response", authenticator.on_response, req.api_key,
                              req.api_version, body)
        except errors.KafkaError as e:
            poll.close(connection, e, now)
            return
        if request is not None:
            self._send_internal(poll, connection, request, now, INTERNAL_SASL)
            return
        reauth_at_ms = authenticator.reauth_at(now)
        log.debug("Node %s: SASL %s authentication done%s", connection.node_id,
                  authenticator.mechanism_name, "" if reauth_at_ms is None else
                  ", session of %d ms" % authenticator.session_lifetime_ms)
        connection.setup.authenticator = None
        connection.set_ready(connection.api_versions, reauth_at_ms)

    def reauthenticate(self, poll, connection, now):
        """KIP-368: a READY connection whose SASL session nears its end authenticates again."""
        log.debug("Node %s: re-authenticating (SASL session ends soon)", connection.node_id)
        self._start_authentication(poll, connection, now)

    # -- the other NetworkHooks --

    def handle_internal(self, poll, connection, req, body, now):
        """The response to a request the client sent itself."""
        if req.internal == INTERNAL_API_VERSIONS:
            self._handle_api_versions(poll, connection, req, body, now)
        elif req.internal == INTERNAL_METADATA:
            poll.updater.handle_response(poll, connection, req, body, now)
        elif req.internal == INTERNAL_SASL:
            self._handle_sasl(poll, connection, req, body, now)

    def connection_closed(self, poll, connection, state, error, failed, now, request_update):
        """Once connection closed (it was in ``state``): its setup's backoff, log, decide, and
        return the error its failed requests (``failed``) complete with."""
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
        updater = poll.updater
        for req in failed:
            if req.internal == INTERNAL_METADATA:
                updater.request_failed(now)
        if request_update:
            if updater.update_due(now):  # Java: treat as a failed update, to back off
                self.metadata.failed_update(now)
            self.metadata.request_update()  # the disconnect may come from stale metadata
        return error

    def response_header_end(self, frame):
        """Where a response's body starts, past its correlation id and tagged fields;
        KafkaError if the header does not decode."""
        r = Reader(frame)
        r.read_int32()
        decoded("a response header", r.read_tagged_fields)
        return r.pos

    def request_head(self, api_key, version):
        """(request header before the correlation id, after it, response header version) for
        an API and version (NetworkPoll caches it)."""
        api = api_module(api_key).API
        w = Writer()  # key, version | correlation id | client id (and tagged fields)
        header.write_request_header(w, api, version, 0, self._client_id)
        head = w.getvalue()
        return head[:4], head[8:], header.response_header_version(api, version)

    def use_transaction_v2(self, poll, enabled):
        """Produce v12 (transactions v2) or at most v11 from now on; each open connection
        forgets the Produce version it picked."""
        if enabled != self.produce_v12:
            self.produce_v12 = enabled
            for connection in poll.connections.values():
                connection.forget_produce_version()

    def api_version(self, connection, api_key):
        """Highest version of api_key both pyprod and the connection's broker support."""
        if connection is None or connection.api_versions is None:
            raise errors.IllegalStateError("%s has no negotiated API versions (not connected)"
                                           % ("no node" if connection is None else
                                              "node %s" % connection.node_id))
        version = api_versions.pick_version(api_module(api_key), connection.api_versions)
        if api_key == produce.API_KEY and self.produce_v12 and \
                connection.api_versions[api_key][1] >= _PRODUCE_TXN_V2:
            return _PRODUCE_TXN_V2
        return version
