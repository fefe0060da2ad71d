# cython: binding=False
"""Compiled twin of kcore/pure/network_poll.py: the NetworkClient's data path (NetworkPoll and
each BrokerConnection), compiled in from kcore/_broker_connection.py and network_poll.py,
so that a steady produce stream runs no Python bytecode in it."""
from kcore.channel import Channel  # a connection's framing buffer (the compiled twin's)

include "_broker_connection.py"  # BrokerConnection, InFlightRequest, the states
include "_network_poll.py"       # NetworkPoll, ClientResponse

__all__ = ["DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
           "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest",
           "ClientResponse", "BrokerConnection", "NetworkPoll", "ssl_failure", "drop_tracebacks", "now_ms"]
