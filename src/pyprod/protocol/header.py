"""Request/response headers and size-prefixed frames.

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable
string (always the non-compact encoding). v2 (flexible APIs) adds a tagged-field section.
Response header v0: correlation_id int32; v1 (flexible) adds tagged fields, except that an
ApiVersions response always uses header v0 (the client can't yet know whether the broker speaks
flexible versions).
"""
from collections import namedtuple

from pyprod.errors import CorrelationIdError, KafkaProtocolError

from .wire import Writer, as_reader

API_VERSIONS_KEY = 18
MAX_FRAME_SIZE = 0x7FFFFFFF

RequestHeader = namedtuple("RequestHeader", "api_key api_version correlation_id client_id")


def request_header_version(api, version):
    return 2 if api.flexible(version) else 1


def response_header_version(api, version):
    if api.key == API_VERSIONS_KEY or not api.flexible(version):
        return 0
    return 1


def write_request_header(w, api, version, correlation_id, client_id):
    w.write_int16(api.key)
    w.write_int16(version)
    w.write_int32(correlation_id)
    w.write_string(client_id, nullable=True)
    if request_header_version(api, version) >= 2:
        w.write_tagged_fields()


def request_writer(api, version, correlation_id, client_id, zero_copy_min=None):
    """A framed Writer holding the header; write the body, then call finish()."""
    api.check(version)
    w = Writer(framed=True, zero_copy_min=zero_copy_min)
    write_request_header(w, api, version, correlation_id, client_id)
    return w


def frame_request(api, version, correlation_id, client_id, body):
    """Size prefix + header + an already encoded body, as bytes."""
    w = request_writer(api, version, correlation_id, client_id)
    w.write_raw(body)
    return w.finish().getvalue()


def read_response_header(r, api, version, expected_correlation_id=None):
    """Read the response header from Reader ``r``; returns the correlation id."""
    correlation_id = r.read_int32()
    if response_header_version(api, version) >= 1:
        r.read_tagged_fields()
    if expected_correlation_id is not None and correlation_id != expected_correlation_id:
        raise CorrelationIdError("correlation id %d does not match the request's %d"
                                 % (correlation_id, expected_correlation_id))
    return correlation_id


def decode_response(module, version, data, expected_correlation_id=None, strict=True):
    """Header + body of one response frame (without its size prefix).

    ``module`` is a message module (api_versions, metadata, ...). Returns (correlation_id, body).
    """
    r = as_reader(data)
    correlation_id = read_response_header(r, module.API, version, expected_correlation_id)
    return correlation_id, module.decode_response(version, r, strict)


def read_request_header(data, flexible_from):
    """Broker side: (RequestHeader, Reader at the body). ``flexible_from``: api_key -> version."""
    r = as_reader(data)
    api_key = r.read_int16()
    api_version = r.read_int16()
    correlation_id = r.read_int32()
    client_id = r.read_string(nullable=True)
    first_flexible = flexible_from.get(api_key)
    if first_flexible is not None and api_version >= first_flexible:
        r.read_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id), r


def write_response_frame(api, version, correlation_id, body):
    """Broker side: size prefix + response header + encoded body, as bytes."""
    w = Writer(framed=True)
    w.write_int32(correlation_id)
    if response_header_version(api, version) >= 1:
        w.write_tagged_fields()
    w.write_raw(body)
    return w.finish().getvalue()


def frame_size(prefix, max_size=MAX_FRAME_SIZE):
    """Decode a 4-byte size prefix, refusing negative or oversized frames."""
    r = as_reader(prefix)
    size = r.read_int32()
    if size < 0 or size > max_size:
        raise KafkaProtocolError("frame size %d outside 0..%d" % (size, max_size))
    return size
