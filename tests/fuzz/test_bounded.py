"""Bounded memory: a claimed count or length far beyond the bytes received is refused before
anything is allocated for it (no list preallocated for 2^31-1 items, no MemoryError, no loop
over the claimed count). Measured as the peak of what Python allocates during the decode."""
import random

import pytest

from pyprod.errors import KafkaProtocolError
from pyprod.protocol import api_versions, header, metadata, produce, sasl_handshake
from tests.harness import fuzz

LIMIT = 64 * 1024  # bytes; a 2^31-1 item list alone would be 16 GiB
MAX_INT32 = b"\x7f\xff\xff\xff"
COMPACT_MAX = b"\x80\x80\x80\x80\x08"  # compact count 2^31-1
COMPACT_U32 = b"\xff\xff\xff\xff\x0f"  # compact count 2^32-2


CLAIMS = [  # (module, version, body)
    (api_versions, 0, b"\x00\x00" + MAX_INT32),                        # 2^31-1 api keys
    (api_versions, 3, b"\x00\x00" + COMPACT_MAX),
    (api_versions, 3, b"\x00\x00\x01\x00\x00\x00\x00" + COMPACT_U32),   # 2^32-1 tagged fields
    (api_versions, 3, b"\x00\x00\x01\x00\x00\x00\x00\x01\x00" + COMPACT_U32),  # a 4 GB tag
    (api_versions, 3, b"\x00\x00\x01\x00\x00\x00\x00\x01\x00\x05" + COMPACT_MAX),  # features
    (metadata, 0, MAX_INT32),                                            # 2^31-1 brokers
    (metadata, 0, b"\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff"),         # 32767-byte host
    (metadata, 0, b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01\x00\x00\x00\x01t" + MAX_INT32),
    (metadata, 1, b"\x00\x00\x00\x00\x00\x00\x00\x00" + b"\x00\x00\x00\x01\x00\x00\x00\x01t\x00"
     + b"\x00\x00\x00\x01" + bytes(10) + MAX_INT32),                     # 2^31-1 replicas
    (metadata, 12, b"\x00\x00\x00\x00" + COMPACT_U32),
    (metadata, 12, b"\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00" + COMPACT_MAX),  # topics
    (produce, 3, MAX_INT32),
    (produce, 9, COMPACT_U32),
    (sasl_handshake, 1, b"\x00\x00" + MAX_INT32),                        # 2^31-1 mechanisms
    (sasl_handshake, 1, b"\x00\x00\x00\x00\x00\x01\x7f\xff"),           # a 32767-byte name
]


@pytest.mark.parametrize("module,version,body", CLAIMS)
def test_huge_claims_are_refused_before_allocating(module, version, body):
    for strict in (True, False):
        result, peak = fuzz.allocation_peak(module.decode_response, version, body, strict)
        assert isinstance(result, KafkaProtocolError), result
        assert peak < LIMIT, peak


def test_huge_claims_at_the_frame_layer():
    result, peak = fuzz.allocation_peak(header.frame_size, b"\x7f\xff\xff\xff", 100_000_000)
    assert isinstance(result, KafkaProtocolError) and peak < LIMIT
    result, peak = fuzz.allocation_peak(header.frame_size, b"\xff\xff\xff\xfe")
    assert isinstance(result, KafkaProtocolError) and peak < LIMIT


@pytest.mark.parametrize("name", ["response", "produce_codec", "connection", "network_client",
                                  "sasl"])
def test_every_length_false(fuzz_targets, name):
    """Seeds with every length, count and tag size possibly false (huge, negative, null, one
    off): memory stays in proportion to the input, never to what it claims. (Each input runs
    twice; the second is measured, without one-time costs such as imports and caches.)"""
    target = fuzz_targets[name]
    rng = random.Random(name)
    for _ in range(150):
        case = rng.choice(target.cases)
        data = target.seed(case, rng, 1.0)
        fuzz.allocation_peak(target.run, case, data)  # once first: imports, caches
        result, peak = fuzz.allocation_peak(target.run, case, data)
        assert peak < LIMIT + 64 * len(data), (case, data, peak)
