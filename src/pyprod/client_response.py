"""ClientResponse: what a request's callback gets from NetworkClient (Java's ClientResponse)."""


class ClientResponse:
    """What a request's callback receives. ``body`` is the response body after the response
    header (bytes-like), None if ``error`` is set or for requests that expect no response."""
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
