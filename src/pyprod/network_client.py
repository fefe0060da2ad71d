"""NetworkClient: Java's NetworkClient, in one thread (the Sender's): the front end its users call.

The data path is kcore's NetworkPoll (``client.network_poll``), compiled: it holds the
connections (kcore BrokerConnections), the selector and the completed responses; callers poll,
wake it up (any thread) and count what is in flight there. Its poll() select()s on every broker
socket plus a wakeup socketpair, does the IO, expires requests (a timed-out request closes its
connection, failing everything in flight on it), keeps the metadata fresh (its ``updater``,
metadata_updater.py), then runs the response callbacks, and asks its policy (its ``hooks``,
``client.lifecycle``: connection_lifecycle.py's ConnectionLifecycle) for what needs a decision:
the connections' setup (TCP, SOCKS5, TLS, ApiVersions, SASL), their close, the API versions.
References go one way: this class holds the NetworkPoll and the policy; neither holds this
class, and the policy and the updater hold no NetworkPoll (they get it as an argument). Times
are monotonic ms (kcore.now_ms). Whatever a broker sends ends as a typed error: a reply that
does not decode is a KafkaProtocolError that closes its connection, with backoff.
"""
from kcore import NetworkPoll, Selector, Waker
from pyprod import errors
from pyprod.connection import (AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED,
                               HANDSHAKING, MAX_DELAY_MS, READY)
from pyprod.connection_lifecycle import (INTERNAL_METADATA, ConnectionLifecycle, api_module,
                                         is_authentication_failure)
from pyprod.metadata import now_ms
from pyprod.metadata_updater import MetadataUpdater

__all__ = ["NetworkClient", "DISCONNECTED", "CONNECTING", "HANDSHAKING",
           "CHECKING_API_VERSIONS", "AUTHENTICATING", "READY", "MAX_DELAY_MS",
           "is_authentication_failure"]


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
        self._request_timeout_ms = int(request_timeout_ms)
        # the policy: NetworkPoll's hooks, and the connections' making and connecting
        self.lifecycle = ConnectionLifecycle(
            metadata, client_id=client_id, request_timeout_ms=request_timeout_ms,
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
            connection_options=dict(socket_options=socket_options, ssl_context=ssl_context,
                                    receive_message_max_bytes=receive_message_max_bytes,
                                    **(connection_options or {})),
            sasl_authenticator=sasl_authenticator)
        updater = MetadataUpdater(metadata, self.lifecycle, INTERNAL_METADATA,
                                  allow_auto_create_topics)
        # the data path: the connections (node_id -> kcore BrokerConnection, kept across
        # reconnects), the selector, the in-flight requests, the completed responses; callers
        # poll, wake it up and count what is in flight there
        self.network_poll = NetworkPoll(self.lifecycle, metadata, updater, Selector(), Waker(),
                                        max_in_flight=max_in_flight_requests_per_connection,
                                        request_timeout_ms=request_timeout_ms,
                                        idle_ms=connections_max_idle_ms)
        self._connections = self.network_poll.connections

    # -- connection state --

    def ready(self, node_id, now):
        """NetworkPoll.is_ready() (False while a metadata update is due: it goes first, as in
        Java), and if the node is disconnected and its backoff passed, start connecting."""
        if self.network_poll.is_ready(node_id, now):
            return True
        self.lifecycle.connect_if_allowed(self.network_poll, node_id, now)
        return False

    def connection_delay(self, node_id, now):
        """ms to wait before node_id is worth checking: the remaining reconnect backoff if
        disconnected, 0 if READY with room for a request, MAX_DELAY_MS while connecting or
        while its in-flight limit is reached (a response or the connection will wake poll)."""
        return self.lifecycle.connection_delay(self.network_poll, node_id, now)

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
        return self.lifecycle.least_loaded_node(self.network_poll, now)

    def api_version(self, node_id, api_key):
        """Highest version of api_key both pyprod and node_id support."""
        return self.lifecycle.api_version(self._connections.get(node_id), api_key)

    def transaction_version(self):
        """The brokers' finalized transaction.version (KIP-890): 2+ for transactions v2."""
        return self.lifecycle.features[1].get("transaction.version", 0)

    def use_transaction_v2(self, enabled):
        """Produce v12 (transactions v2: it adds the partition to the transaction) or at
        most v11; switched between transactions only, on the Sender thread."""
        self.lifecycle.use_transaction_v2(self.network_poll, enabled)

    def broker_api_versions(self, node_id):
        """{api_key: (min, max)} the broker announced, or None."""
        connection = self._connections.get(node_id)
        if connection is None or connection.api_versions is None:
            return None
        return dict(connection.api_versions)

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
        module = api_module(api_key)
        module.API.check(api_version)
        now = now_ms()
        return self.network_poll.enqueue(
            connection, api_key, api_version, body, expects_response, callback,
            self._request_timeout_ms if timeout_ms is None else timeout_ms, now, None)

    # -- closing --

    def close_node(self, node_id):
        connection = self._connections.get(node_id)
        if connection is not None and connection.state != DISCONNECTED:
            self.network_poll.close(connection, errors.KafkaConnectionError(
                "closed by the client"), now_ms(), request_update=False)
