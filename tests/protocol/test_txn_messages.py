"""Transaction messages (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit): round
trips of every version, hand-written bytes, byte identity with kafka-python, the helpers, and
ApiVersions' finalized features."""
import pytest

from pyprod.errors import KafkaProtocolError
from pyprod.protocol import (BY_KEY, FLEXIBLE_FROM, add_offsets_to_txn, add_partitions_to_txn,
                             api_versions, end_txn, header, txn_offset_commit)
from tests.protocol.test_messages import kp_available, needs_kp, samples, to_kp

MODULES = [add_partitions_to_txn, add_offsets_to_txn, end_txn, txn_offset_commit]
CASES = [(m, v) for m in MODULES for v in range(m.MIN_VERSION, m.MAX_VERSION + 1)]
IDS = ["%s-v%d" % (m.API.name, v) for m, v in CASES]

if kp_available:
    from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                                         AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                         EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
                                         TxnOffsetCommitResponse)
    KP = {
        add_partitions_to_txn: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
        add_offsets_to_txn: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
        end_txn: (EndTxnRequest, EndTxnResponse),
        txn_offset_commit: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    }

# one public encode_request() call per API; _expected() is what it must decode to
PARTITIONS = [("b", 2), ("a", 1), ("b", 0), ("a", 1)]
OFFSETS = {("b", 0): (10, None, 4), ("a", 3): (5, "meta", -1), ("a", 1): (0, "", 7)}
GROUP = {"generation_id": 9, "member_id": "m-1", "group_instance_id": "gi"}
CALLS = {
    add_partitions_to_txn: ("tx", 7, 3, PARTITIONS),
    add_offsets_to_txn: ("tx", 7, 3, "grp"),
    end_txn: ("tx", 7, 3, True),
    txn_offset_commit: ("tx", "grp", 7, 3, OFFSETS),
}


def _call(module, version):
    kw = GROUP if module is txn_offset_commit and version >= 3 else {}
    return module.encode_request(version, *CALLS[module], **kw)


def _expected_offsets(version):
    """OFFSETS as decoded TxnOffsetCommit topics: sorted, epoch -1 below v2."""
    P, T = txn_offset_commit.RequestPartition.type, txn_offset_commit.RequestTopic.type
    parts = {}
    for (t, p), (offset, meta, epoch) in sorted(OFFSETS.items()):
        parts.setdefault(t, []).append(P(p, offset, epoch if version >= 2 else -1, meta))
    return tuple(T(t, tuple(ps)) for t, ps in parts.items())


def _expected(module, version):
    """What _call() decodes to: a request namedtuple, fields absent in ``version`` at their
    defaults."""
    fields = {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 3}
    if module is add_partitions_to_txn:
        T = add_partitions_to_txn.Topic.type
        fields["topics"] = (T("a", (1,)), T("b", (0, 2)))
    elif module is add_offsets_to_txn:
        fields["group_id"] = "grp"
    elif module is end_txn:
        fields["committed"] = True
    else:
        fields.update(group_id="grp", topics=_expected_offsets(version),
                      **(GROUP if version >= 3 else {}))
    struct = module.API.request
    return struct.type(**dict({f.name: f.default for f in struct.fields}, **fields))


# ---- round trips ----

@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_request_round_trip(module, version):
    api = module.API
    for value in samples(module, version, which="request"):
        assert api.decode_request(version, api.encode_request(version, value)) == value
    assert api.decode_request(version, _call(module, version)) == _expected(module, version)


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_round_trip(module, version):
    for value in samples(module, version):
        data = module.API.encode_response(version, value)
        assert module.decode_response(version, data) == value
        assert module.decode_response(version, memoryview(bytearray(data))) == value
        assert module.decode_response(version, data + b"\x00", strict=False) == value
        for n in range(len(data)):
            with pytest.raises(KafkaProtocolError):
                module.decode_response(version, data[:n])
        with pytest.raises(KafkaProtocolError, match="trailing"):
            module.decode_response(version, data + b"\x00")


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_frame_round_trip(module, version):
    value = samples(module, version, 1)[0]
    frame = header.write_response_frame(module.API, version, 11,
                                        module.API.encode_response(version, value))
    assert header.decode_response(module, version, frame[4:]) == (11, value)


# ---- hand-written bytes ----

TX, PID, EPOCH = b"tx", (7).to_bytes(8, "big"), b"\x00\x03"
KNOWN_REQUESTS = [
    # EndTxn v0: int16-length string, int64, int16, bool
    (end_txn, 0, b"\x00\x02" + TX + PID + EPOCH + b"\x01"),
    # v3: compact string (length + 1), then an empty tag section
    (end_txn, 3, b"\x03" + TX + PID + EPOCH + b"\x01\x00"),
    (add_offsets_to_txn, 0, b"\x00\x02" + TX + PID + EPOCH + b"\x00\x03grp"),
    (add_offsets_to_txn, 4, b"\x03" + TX + PID + EPOCH + b"\x04grp\x00"),
    # topics a:[1], b:[0, 2]: int32 array counts before v3, compact counts and a tag section
    # per topic from v3
    (add_partitions_to_txn, 0, b"\x00\x02" + TX + PID + EPOCH + b"\x00\x00\x00\x02"
     + b"\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x01"
     + b"\x00\x01b\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02"),
    (add_partitions_to_txn, 3, b"\x03" + TX + PID + EPOCH + b"\x03"
     + b"\x02a\x02\x00\x00\x00\x01\x00"
     + b"\x02b\x03\x00\x00\x00\x00\x00\x00\x00\x02\x00" + b"\x00"),
]


@pytest.mark.parametrize("module,version,data", KNOWN_REQUESTS,
                         ids=["%s-v%d" % (m.API.name, v) for m, v, _ in KNOWN_REQUESTS])
def test_request_known_bytes(module, version, data):
    assert _call(module, version) == data


def test_end_txn_request_abort_and_bool():
    assert end_txn.encode_request(0, "tx", 7, 3, False)[-1:] == b"\x00"
    assert end_txn.encode_request(0, "tx", 7, 3, 1)[-1:] == b"\x01"


def test_txn_offset_commit_known_bytes():
    offsets = {("a", 3): (5, None, 4)}
    head = b"\x00\x02tx\x00\x01g" + PID + EPOCH
    part = b"\x00\x00\x00\x03" + (5).to_bytes(8, "big")
    assert txn_offset_commit.encode_request(1, "tx", "g", 7, 3, offsets) == \
        head + b"\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01" + part + b"\xff\xff"
    assert txn_offset_commit.encode_request(2, "tx", "g", 7, 3, offsets) == \
        head + b"\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01" + part + b"\x00\x00\x00\x04\xff\xff"
    # v3: generation -1, member "" (compact: 1), null group instance (compact: 0), the leader
    # epoch, a null metadata (0) and a tag section after each partition, topic and the request
    assert txn_offset_commit.encode_request(3, "tx", "g", 7, 3, offsets) == \
        b"\x03tx\x02g" + PID + EPOCH + b"\xff\xff\xff\xff\x01\x00" \
        + b"\x02\x02a\x02" + part + b"\x00\x00\x00\x04\x00\x00" + b"\x00" + b"\x00"


KNOWN_RESPONSES = [
    (end_txn, 2, b"\x00\x00\x00\x05\x00\x30", (5, 48, -1, -1)),
    (end_txn, 4, b"\x00\x00\x00\x05\x00\x30\x00", (5, 48, -1, -1)),
    # v5 (transactions v2): the bumped producer id and epoch follow the error code
    (end_txn, 5, b"\x00\x00\x00\x00\x00\x00" + (8).to_bytes(8, "big") + b"\x00\x00\x00",
     (0, 0, 8, 0)),
    (add_offsets_to_txn, 3, b"\x00\x00\x00\x00\x00\x5a\x00", (0, 90)),
]


@pytest.mark.parametrize("module,version,data,value", KNOWN_RESPONSES,
                         ids=["%s-v%d" % (m.API.name, v) for m, v, _, _ in KNOWN_RESPONSES])
def test_response_known_bytes(module, version, data, value):
    assert tuple(module.decode_response(version, data)) == value


# ---- helpers and checks ----

def test_add_partitions_to_txn_partition_errors():
    R, T, P = (add_partitions_to_txn.RESPONSE.type, add_partitions_to_txn.TopicResult.type,
               add_partitions_to_txn.PartitionResult.type)
    resp = R(0, (T("a", (P(0, 0), P(1, 48))), T("b", (P(2, 53),))))
    for version in range(4):
        data = add_partitions_to_txn.API.encode_response(version, resp)
        assert add_partitions_to_txn.partition_errors(
            add_partitions_to_txn.decode_response(version, data)) == \
            {("a", 0): 0, ("a", 1): 48, ("b", 2): 53}
    assert add_partitions_to_txn.partition_errors(R(0, ())) == {}


def test_txn_offset_commit_partition_errors():
    R, T, P = (txn_offset_commit.RESPONSE.type, txn_offset_commit.ResponseTopic.type,
               txn_offset_commit.ResponsePartition.type)
    resp = R(3, (T("a", (P(3, 0),)), T("b", (P(0, 22), P(1, 25)))))
    data = txn_offset_commit.API.encode_response(5, resp)
    assert txn_offset_commit.partition_errors(txn_offset_commit.decode_response(5, data)) == \
        {("a", 3): 0, ("b", 0): 22, ("b", 1): 25}


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("group", [{"generation_id": 1}, {"member_id": "m"},
                                   {"group_instance_id": "gi"}])
def test_txn_offset_commit_group_metadata_needs_v3(version, group):
    with pytest.raises(ValueError, match="v3"):
        txn_offset_commit.encode_request(version, "tx", "g", 7, 3, OFFSETS, **group)


def test_versions_beyond_the_client_range_are_refused():
    with pytest.raises(ValueError):  # v4+ is the brokers' batched form
        add_partitions_to_txn.encode_request(4, "tx", 7, 3, PARTITIONS)
    for module in MODULES:
        with pytest.raises(ValueError):
            module.decode_response(module.MAX_VERSION + 1, b"")
    with pytest.raises(TypeError):  # a null transactional id can't be written
        end_txn.encode_request(0, None, 7, 3, True)


def test_registry():
    for module, key in ((add_partitions_to_txn, 24), (add_offsets_to_txn, 25), (end_txn, 26),
                        (txn_offset_commit, 28)):
        assert BY_KEY[key] is module and module.API_KEY == key
        assert FLEXIBLE_FROM[key] == module.FLEXIBLE_FROM == 3
        assert header.request_header_version(module.API, 2) == 1
        assert header.request_header_version(module.API, 3) == 2
        assert header.response_header_version(module.API, 3) == 1
    assert [(m.MIN_VERSION, m.MAX_VERSION) for m in MODULES] == [(0, 3), (0, 4), (0, 5), (0, 5)]


# ---- ApiVersions: finalized features ----

def _api_versions_response(version, **fields):
    data = api_versions.API.encode_response(version, dict(
        {"error_code": 0, "api_keys": [(26, 0, 5)], "throttle_time_ms": 0}, **fields))
    return api_versions.decode_response(version, data)


def test_finalized_features():
    F = api_versions.FinalizedFeature.type
    features = [F("transaction.version", 2, 0), F("metadata.version", 22, 22)]
    for version in (3, 4):
        resp = _api_versions_response(version, finalized_features_epoch=5,
                                      finalized_features=features)
        assert api_versions.finalized_features(resp) == \
            {"transaction.version": 2, "metadata.version": 22}
        assert api_versions.finalized_features(_api_versions_response(version)) == {}
    for version in (0, 1, 2):
        assert api_versions.finalized_features(
            _api_versions_response(version, finalized_features=features)) == {}


# ---- byte identity with kafka-python ----

@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_bytes_match_kafka_python(module, version):
    kp_resp = KP[module][1]
    for value in samples(module, version):
        ours = module.API.encode_response(version, value)
        theirs = bytes(to_kp(kp_resp, module.API.response, value, version)
                       .encode(version=version))
        assert ours == theirs


@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_request_bytes_match_kafka_python(module, version):
    kp_req = KP[module][0]
    expected = _expected(module, version)
    if module is add_partitions_to_txn:  # kafka-python keeps the schema's V3AndBelow names
        T = kp_req.AddPartitionsToTxnTopic
        theirs = kp_req(v3_and_below_transactional_id=expected.transactional_id,
                        v3_and_below_producer_id=expected.producer_id,
                        v3_and_below_producer_epoch=expected.producer_epoch,
                        v3_and_below_topics=[T(name=t.name, partitions=list(t.partitions))
                                             for t in expected.topics])
        assert _call(module, version) == bytes(theirs.encode(version=version))
        return
    theirs = to_kp(kp_req, module.API.request, expected, version)
    assert _call(module, version) == bytes(theirs.encode(version=version))
    for value in samples(module, version, which="request"):  # the nullable fields too
        theirs = to_kp(kp_req, module.API.request, value, version).encode(version=version)
        assert module.API.encode_request(version, value) == bytes(theirs)
