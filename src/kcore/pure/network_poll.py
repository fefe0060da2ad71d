"""The NetworkClient's data path (Java's NetworkClient.poll with its Selector and
InFlightRequests): NetworkPoll and each BrokerConnection. The code is
kcore/_broker_connection.py and kcore/_network_poll.py, which the compiled twin
compiles in; this twin runs it as Python."""
from kcore._broker_connection import (  # noqa: F401
    AUTHENTICATING, CHECKING_API_VERSIONS, CONNECTING, DISCONNECTED, HANDSHAKING, MAX_DELAY_MS,
    READY, SETTING_UP, BrokerConnection, InFlightRequest, drop_tracebacks, ssl_failure)
from kcore._network_poll import ClientResponse, NetworkPoll, now_ms  # noqa: F401

__all__ = ["DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
           "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest",
           "ClientResponse", "BrokerConnection", "NetworkPoll", "ssl_failure", "drop_tracebacks", "now_ms"]
