"""kcore.produce_codec: ProduceRequest bodies byte-identical to the generic Struct encoding of
the protocol module's REQUEST schema (and between the twins), and ProduceResponse results, on
both implementations; malformed responses raise KafkaProtocolError."""
import random

import pytest

from pyprod.errors import KafkaProtocolError
from pyprod.protocol import produce

VERSIONS = range(produce.MIN_VERSION, produce.MAX_VERSION + 1)
BATCHES = [("t", 0, b"a" * 100), ("ü-topic", 3, bytearray(b"b" * 5)), ("t", 1, b""),
           ("t", 2, memoryview(b"xyz" * 1000)), ("other", 0, b"\x00\x01")]


def _schema_encoding(version, acks, timeout_ms, transactional_id, batches):
    """The same request through pyprod.protocol's generic Struct codec (topics grouped in
    first-seen order)."""
    topics = {}
    for topic, partition, payload in batches:
        topics.setdefault(topic, []).append({"index": partition, "records": payload})
    return produce.API.encode_request(version, {
        "transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
        "topic_data": [{"name": t, "partition_data": parts} for t, parts in topics.items()]})


def _joined(parts):
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("acks,transactional_id", [(1, None), (-1, "tx-ü"), (0, None)])
def test_request_body_is_the_schemas(k, version, acks, transactional_id):
    parts = k.encode_produce_body(version, acks, 1234, transactional_id, BATCHES)
    assert _joined(parts) == _schema_encoding(version, acks, 1234, transactional_id, BATCHES)
    if not k.pure:  # the batches themselves go to writev, uncopied
        assert [id(b) for _, _, b in BATCHES[:1]] == [id(parts[1])]


@pytest.mark.parametrize("version", VERSIONS)
def test_request_body_twins_agree(both, version):
    py, c = both
    for transactional_id in (None, "tx"):
        assert _joined(py.encode_produce_body(version, -1, 30000, transactional_id, BATCHES)) \
            == _joined(c.encode_produce_body(version, -1, 30000, transactional_id, BATCHES))


def test_request_without_batches_and_with_a_null_one(k):
    for version in (3, 9):
        for batches in ([], [("t", 0, None)]):
            assert _joined(k.encode_produce_body(version, 1, 5, None, batches)) == \
                _schema_encoding(version, 1, 5, None, batches)
    # v3, no transactional id, acks 1, timeout 10 ms, topic "t" with partition 0's batch null
    assert _joined(k.encode_produce_body(3, 1, 10, None, [("t", 0, None)])) == \
        b"\xff\xff\x00\x01\x00\x00\x00\x0a\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01" \
        b"\x00\x00\x00\x00\xff\xff\xff\xff"


@pytest.mark.parametrize("bad", [{"version": 2}, {"version": 13}, {"acks": 2}, {"acks": -2}])
def test_request_arguments_are_checked(k, bad):
    args = dict(version=9, acks=1)
    args.update(bad)
    with pytest.raises(ValueError):
        k.encode_produce_body(args["version"], args["acks"], 5, None, BATCHES)


def _response(version, rng):
    topics = []
    for t in range(rng.randint(0, 3)):
        parts = []
        for p in range(rng.randint(0, 4)):
            errors = [{"batch_index": rng.randint(0, 99),
                       "batch_index_error_message": rng.choice([None, "", "bad record é"])}
                      for _ in range(rng.randint(0, 2))]
            parts.append({
                "index": p, "error_code": rng.choice([0, 0, 6, 45, -1]),
                "base_offset": rng.randint(-1, 1 << 40), "log_append_time_ms":
                    rng.choice([-1, 1700000000000]), "log_start_offset": rng.randint(-1, 99),
                "record_errors": errors, "error_message": rng.choice([None, "NOT_LEADER"]),
                "current_leader": rng.choice([None, {"leader_id": 2, "leader_epoch": 7}])})
        topics.append({"name": "topic-%d-ü" % t, "partition_responses": parts})
    endpoints = rng.choice([[], [{"node_id": 1, "host": "127.0.0.1", "port": 9092,
                                  "rack": None}]])
    value = {"responses": topics, "throttle_time_ms": rng.randint(0, 500),
             "node_endpoints": endpoints}
    return produce.API.encode_response(version, value), value


def _expected(version, value):
    results = []
    for t in value["responses"]:
        for p in t["partition_responses"]:
            v8 = version >= 8
            results.append((
                t["name"], p["index"], p["error_code"], p["base_offset"],
                p["log_append_time_ms"], p["log_start_offset"] if version >= 5 else -1,
                p["error_message"] if v8 else None,
                tuple((e["batch_index"], e["batch_index_error_message"])
                      for e in p["record_errors"]) if v8 else ()))
    return results, value["throttle_time_ms"]


@pytest.mark.parametrize("version", VERSIONS)
def test_response_results(k, version):
    rng = random.Random(version)
    for _ in range(40):
        body, value = _response(version, rng)
        assert k.decode_produce_response(version, body) == _expected(version, value)
        # bytes after the message are ignored; memoryviews are read in place
        assert k.decode_produce_response(version, memoryview(body + b"junk")) == \
            _expected(version, value)


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_every_truncation_raises(k, version):
    body, _ = _response(version, random.Random(99))
    for n in range(len(body)):
        with pytest.raises(KafkaProtocolError):
            k.decode_produce_response(version, body[:n])


@pytest.mark.parametrize("version", [3, 5, 8, 9, 11])
def test_corrupt_responses_agree(both, version):
    """Random byte flips: both implementations give the same results or both refuse."""
    py, c = both
    rng = random.Random(version * 7)
    for _ in range(300):
        body, _ = _response(version, rng)
        if not body:
            continue
        data = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        outcomes = []
        for impl in (py, c):
            try:
                outcomes.append(impl.decode_produce_response(version, bytes(data)))
            except KafkaProtocolError:
                outcomes.append(KafkaProtocolError)
        assert outcomes[0] == outcomes[1]


def test_response_arguments_are_checked(k):
    with pytest.raises(ValueError):
        k.decode_produce_response(2, b"")
    with pytest.raises(TypeError):
        k.decode_produce_response(9, "not bytes")
    with pytest.raises(KafkaProtocolError):  # an array count larger than the bytes left
        k.decode_produce_response(3, b"\x7f\xff\xff\xff")
