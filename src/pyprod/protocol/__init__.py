"""Kafka wire protocol: request/response framing for the APIs the producer uses.

Each message module has API (a schema.Api), API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM,
encode_request(version, ...) -> body bytes and decode_response(version, data) -> namedtuple;
produce has no encode_request: kcore's produce_codec writes ProduceRequest bodies.
header.py frames requests and reads response headers; wire.py holds Reader/Writer and schema.py
the declarative Struct codec the modules share.
"""
from . import (api_versions, find_coordinator, init_producer_id, metadata, produce,
               sasl_authenticate, sasl_handshake)
from .header import decode_response, frame_request, request_writer

MODULES = (produce, metadata, find_coordinator, api_versions, init_producer_id, sasl_handshake,
           sasl_authenticate)
BY_KEY = {m.API_KEY: m for m in MODULES}
FLEXIBLE_FROM = {m.API_KEY: m.FLEXIBLE_FROM for m in MODULES}

__all__ = ["api_versions", "find_coordinator", "init_producer_id", "metadata", "produce",
           "sasl_authenticate", "sasl_handshake",
           "MODULES", "BY_KEY", "FLEXIBLE_FROM", "decode_response", "frame_request",
           "request_writer"]
