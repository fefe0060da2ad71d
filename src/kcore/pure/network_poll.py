"""The NetworkClient's data path (Java's NetworkClient.poll with its Selector and
InFlightRequests): poll(), request queueing, response dispatch, request timeouts, a connection's
plaintext and TLS byte streams. The code is kcore/shared/network_poll.py, which the compiled twin
compiles in; this twin runs it as Python, with every name it defines."""
from kcore.shared import network_poll as _shared

globals().update((n, v) for n, v in vars(_shared).items() if not n.startswith("__"))
__all__ = _shared.__all__
