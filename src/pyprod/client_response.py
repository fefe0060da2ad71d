"""ClientResponse: what a request's callback gets from NetworkClient (Java's ClientResponse);
kcore.network_poll makes them."""
from kcore import ClientResponse

__all__ = ["ClientResponse"]
