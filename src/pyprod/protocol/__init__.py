"""Kafka wire protocol: request/response framing for the APIs the producer uses.

Each message module has API (a schema.Api), API_KEY, MIN_VERSION, MAX_VERSION, FLEXIBLE_FROM,
encode_request(version, ...) -> body bytes and decode_response(version, data) -> namedtuple;
produce has no encode_request: kcore's produce_codec writes ProduceRequest bodies.
header.py frames requests and reads response headers; wire.py holds Reader/Writer and schema.py
the declarative Struct codec the modules share.
"""
from . import (add_offsets_to_txn, add_partitions_to_txn, api_versions, describe_transactions,
               end_txn, find_coordinator, init_producer_id, metadata, produce,
               sasl_authenticate, sasl_handshake, txn_offset_commit)
from .header import decode_response, frame_request, request_writer

MODULES = (produce, metadata, find_coordinator, api_versions, init_producer_id, sasl_handshake,
           sasl_authenticate, add_partitions_to_txn, add_offsets_to_txn, end_txn,
           txn_offset_commit, describe_transactions)
BY_KEY = {m.API_KEY: m for m in MODULES}
FLEXIBLE_FROM = {m.API_KEY: m.FLEXIBLE_FROM for m in MODULES}

__all__ = ["add_offsets_to_txn", "add_partitions_to_txn", "api_versions",
           "describe_transactions", "end_txn",
           "find_coordinator", "init_producer_id", "metadata", "produce", "sasl_authenticate",
           "sasl_handshake", "txn_offset_commit",
           "MODULES", "BY_KEY", "FLEXIBLE_FROM", "decode_response", "frame_request",
           "request_writer"]
