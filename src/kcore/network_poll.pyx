# cython: binding=False
"""Compiled twin of kcore/pure/network_poll.py: the NetworkClient's data path (NetworkPoll and
each connection's Link), compiled in from kcore/shared/link.py and network_poll.py, so that a
steady produce stream runs no Python bytecode in it."""

include "shared/link.py"          # Link, InFlightRequest, the connection states
include "shared/network_poll.py"  # NetworkPoll, ClientResponse

__all__ = ["DISCONNECTED", "CONNECTING", "HANDSHAKING", "CHECKING_API_VERSIONS",
           "AUTHENTICATING", "READY", "SETTING_UP", "MAX_DELAY_MS", "InFlightRequest",
           "ClientResponse", "Link", "NetworkPoll", "ssl_failure", "drop_tracebacks", "now_ms"]
