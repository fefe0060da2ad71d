"""Message codecs: round trips, byte identity with kafka-python's protocol classes, truncation
and corruption (always KafkaProtocolError)."""
import random
import uuid

import pytest

import kcore
from pyprod.errors import CorrelationIdError, KafkaProtocolError
from pyprod.protocol import (BY_KEY, FLEXIBLE_FROM, api_versions, find_coordinator, header,
                             init_producer_id, metadata, produce, sasl_authenticate,
                             sasl_handshake)
from pyprod.protocol.wire import Reader, Writer

MODULES = [api_versions, metadata, produce, init_producer_id, find_coordinator, sasl_handshake,
           sasl_authenticate]
CASES = [(m, v) for m in MODULES for v in range(m.MIN_VERSION, m.MAX_VERSION + 1)]
IDS = ["%s-v%d" % (m.API.name, v) for m, v in CASES]


# ---- sample values built from our own schemas ----

def _sample_value(f, version, rng):
    t, nullable = f.type, f.nullable_in(version)
    if nullable and rng.random() < 0.25:
        return None
    if t in ("int8", "int16", "int32", "int64"):
        bits = int(t[3:])
        return rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if t == "bool":
        return rng.random() < 0.5
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if t == "string":
        return rng.choice(["", "t", "tópic-%d" % rng.randint(0, 999), "x" * rng.randint(1, 40)])
    if t in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 30)))
    if t == "struct":
        return sample(f.struct, version, rng)
    n = rng.randint(0, 3)
    if f.elem == "int32":
        return tuple(rng.randint(-5, 1 << 20) for _ in range(n))
    if f.elem == "string":
        return tuple("k%d" % rng.randint(0, 99) for _ in range(n))
    return tuple(sample(f.struct, version, rng) for _ in range(n))


def sample(struct, version, rng):
    vals = []
    for f in struct.fields:
        if not f.present(version) or (f.tag is not None and rng.random() < 0.3):
            vals.append(f.default)
        else:
            vals.append(_sample_value(f, version, rng))
    return struct.type._make(vals)


def samples(module, version, n=4, which="response"):
    rng = random.Random("%s/%d/%s" % (module.API.name, version, which))
    struct = getattr(module.API, which)
    return [sample(struct, version, rng) for _ in range(n)]


# ---- kafka-python mirror objects ----

kp_available = True
try:
    from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse,
                                         FindCoordinatorRequest, FindCoordinatorResponse,
                                         MetadataRequest, MetadataResponse)
    from kafka.protocol.producer import (InitProducerIdRequest, InitProducerIdResponse,
                                         ProduceRequest, ProduceResponse)
    from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                     SaslHandshakeRequest, SaslHandshakeResponse)
    KP = {
        api_versions: (ApiVersionsRequest, ApiVersionsResponse),
        metadata: (MetadataRequest, MetadataResponse),
        produce: (ProduceRequest, ProduceResponse),
        init_producer_id: (InitProducerIdRequest, InitProducerIdResponse),
        find_coordinator: (FindCoordinatorRequest, FindCoordinatorResponse),
        sasl_handshake: (SaslHandshakeRequest, SaslHandshakeResponse),
        sasl_authenticate: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    }
except ImportError:  # kafka-python 2.x has no schema-driven protocol classes
    kp_available = False
needs_kp = pytest.mark.skipif(not kp_available, reason="needs kafka-python 3.x protocol classes")

_KP_NAMES = {"topic_authorized_operations": "authorized_operations",
             "cluster_authorized_operations": "authorized_operations"}


def to_kp(kp_class, struct, value, version):
    """Build kafka-python's object holding the same values as our namedtuple."""
    kwargs = {}
    for f in struct.fields:
        if not f.present(version):
            continue
        v = getattr(value, f.name)
        if f.tag is not None and (v is None or v == f.default):
            continue  # we leave default tagged fields out; so must kafka-python
        name = _KP_NAMES.get(f.name, f.name)
        kp_field = kp_class.fields[name]
        if name == "authorized_operations":
            v = {b for b in range(32) if (v & 0xFFFFFFFF) >> b & 1}
        elif f.type == "struct" and v is not None:
            v = to_kp(kp_field.data_class, f.struct, v, version)
        elif f.type == "[]" and v is not None:
            v = [to_kp(kp_field.data_class, f.struct, x, version) for x in v]
        elif f.type.startswith("[]") and v is not None:
            v = list(v)
        kwargs[name] = v
    return kp_class(**kwargs)


# ---- round trips ----

@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_round_trip(module, version):
    for value in samples(module, version):
        data = module.API.encode_response(version, value)
        assert module.decode_response(version, data) == value
        assert module.decode_response(version, memoryview(bytearray(data))) == value


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_request_round_trip(module, version):
    for value in samples(module, version, which="request"):
        try:
            data = module.API.encode_request(version, value)
        except TypeError:
            continue  # e.g. a null where this version can't carry one
        assert module.API.decode_request(version, data) == value


@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_bytes_match_kafka_python(module, version):
    kp_resp = KP[module][1]
    for value in samples(module, version):
        ours = module.API.encode_response(version, value)
        theirs = bytes(to_kp(kp_resp, module.API.response, value, version).encode(version=version))
        assert ours == theirs
        assert module.decode_response(version, theirs) == value


@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_generic_request_bytes_match_kafka_python(module, version):
    kp_req = KP[module][0]
    for value in samples(module, version, which="request"):
        try:
            ours = module.API.encode_request(version, value)
        except TypeError:
            continue
        theirs = bytes(to_kp(kp_req, module.API.request, value, version).encode(version=version))
        assert ours == theirs


# ---- public encode_request() against kafka-python ----

def _kp_bytes(kp_class, version, **kwargs):
    return bytes(kp_class(**kwargs).encode(version=version))


@needs_kp
@pytest.mark.parametrize("version", range(api_versions.MIN_VERSION, api_versions.MAX_VERSION + 1))
def test_api_versions_request_golden(version):
    kw = {}
    if version >= 3:
        kw = {"client_software_name": "pyprod", "client_software_version": "0.1.0"}
    assert api_versions.encode_request(version, "pyprod", "0.1.0") == \
        _kp_bytes(ApiVersionsRequest, version, **kw)
    if version >= 3:
        assert api_versions.encode_request(version, "pyprod", "0.1.0") == b"\x07pyprod\x060.1.0\x00"


@needs_kp
@pytest.mark.parametrize("version", range(metadata.MIN_VERSION, metadata.MAX_VERSION + 1))
@pytest.mark.parametrize("topics", [None, ["a", "tópico"], []])
def test_metadata_request_golden(version, topics):
    if version == 0 and topics == []:
        with pytest.raises(ValueError):
            metadata.encode_request(version, topics)
        return
    T = MetadataRequest.MetadataRequestTopic
    kp_topics = None if topics is None else [T(name=t, topic_id=uuid.UUID(int=0)) for t in topics]
    kw = {"topics": kp_topics}
    if version >= 4:
        kw["allow_auto_topic_creation"] = False
    if version >= 8:
        kw["include_topic_authorized_operations"] = False
        if version <= 10:
            kw["include_cluster_authorized_operations"] = False
    ours = metadata.encode_request(version, topics, allow_auto_topic_creation=False)
    assert ours == _kp_bytes(MetadataRequest, version, **kw)


def test_metadata_request_known_bytes():
    assert metadata.encode_request(1, None) == b"\xff\xff\xff\xff"
    assert metadata.encode_request(0, None) == b"\x00\x00\x00\x00"
    assert metadata.encode_request(4, ["ab"]) == b"\x00\x00\x00\x01\x00\x02ab\x01"
    # v12: compact array (1 item + 1), zero uuid, compact name, tags, flags, tags
    assert metadata.encode_request(12, ["ab"]) == \
        b"\x02" + bytes(16) + b"\x03ab\x00" + b"\x01\x00\x00"
    tid = uuid.uuid4()
    assert metadata.encode_request(12, [tid]) == b"\x02" + tid.bytes + b"\x00\x00\x01\x00\x00"
    with pytest.raises(TypeError):
        metadata.encode_request(9, [tid])  # null names need v10+
    with pytest.raises(TypeError):
        metadata.encode_request(9, "topic")


def _batches():
    rng = random.Random(7)
    return [("t1", 0, bytes(rng.getrandbits(8) for _ in range(61))),
            ("t2", 3, b"\x01\x02"),
            ("t1", 1, bytearray(b"xyz" * 2000)),
            ("t3", 0, memoryview(b"0123456789")[2:8])]


def _grouped(batches):
    """[(topic, [(partition, batch)])], topics in first-seen order (as the codec groups them)."""
    topics = {}
    for topic, partition, batch in batches:
        topics.setdefault(topic, []).append((partition, batch))
    return list(topics.items())


def _produce_body(version, acks, timeout_ms, batches, transactional_id=None, pure=False):
    """A ProduceRequest body from kcore's codec, the one writer of that format."""
    k = kcore.kernels(pure=pure)
    return b"".join(bytes(p) for p in k.encode_produce_body(version, acks, timeout_ms,
                                                            transactional_id, batches))


def _kp_produce(version, acks, timeout_ms, batches, transactional_id):
    TD = ProduceRequest.TopicProduceData
    PD = TD.PartitionProduceData
    topic_data = [TD(name=t, partition_data=[PD(index=p, records=bytes(b)) for p, b in parts])
                  for t, parts in _grouped(batches)]
    return _kp_bytes(ProduceRequest, version, transactional_id=transactional_id, acks=acks,
                     timeout_ms=timeout_ms, topic_data=topic_data)


@needs_kp
@pytest.mark.parametrize("version", range(produce.MIN_VERSION, produce.MAX_VERSION + 1))
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
@pytest.mark.parametrize("pure", [True, False] if kcore.EXTENSIONS else [True])
def test_produce_request_golden(version, transactional_id, pure):
    batches = _batches()
    theirs = _kp_produce(version, -1, 30000, batches, transactional_id)
    body = _produce_body(version, -1, 30000, batches, transactional_id, pure)
    assert body == theirs
    # the generic Struct encoder of the REQUEST schema agrees with the codec
    grouped = [{"name": t, "partition_data": [{"index": p, "records": b} for p, b in parts]}
               for t, parts in _grouped(batches)]
    assert produce.API.encode_request(version, {
        "transactional_id": transactional_id, "acks": -1, "timeout_ms": 30000,
        "topic_data": grouped}) == body
    # whole frame == kafka-python's header + body framing
    req = ProduceRequest.decode(theirs, version=version)
    req.with_header(correlation_id=42, client_id="pyprod-1")
    kp_frame = bytes(req.encode(version=version, header=True, framed=True))
    assert header.frame_request(produce.API, version, 42, "pyprod-1", body) == kp_frame


def test_produce_frame_structure():
    batches = _batches()
    frame = header.frame_request(produce.API, 9, 7, None, _produce_body(9, 1, 1000, batches))
    size = header.frame_size(frame[:4])
    assert size == len(frame) - 4
    hdr, r = header.read_request_header(frame[4:], FLEXIBLE_FROM)
    assert hdr == header.RequestHeader(0, 9, 7, None)
    req = produce.API.decode_request(9, r)
    assert req.acks == 1 and req.timeout_ms == 1000 and req.transactional_id is None
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in req.topic_data] \
        == [(t, [(p, bytes(b)) for p, b in parts]) for t, parts in _grouped(batches)]
    assert not produce.expects_response(0) and produce.expects_response(-1)


@needs_kp
@pytest.mark.parametrize("version", range(init_producer_id.MIN_VERSION,
                                          init_producer_id.MAX_VERSION + 1))
@pytest.mark.parametrize("tid", [None, "tx"])
def test_init_producer_id_request_golden(version, tid):
    kw = {"transactional_id": tid, "transaction_timeout_ms": 60000}
    if version >= 3:
        kw.update(producer_id=1234, producer_epoch=5)
    ours = init_producer_id.encode_request(version, tid, 60000, producer_id=1234, producer_epoch=5)
    assert ours == _kp_bytes(InitProducerIdRequest, version, **kw)


@needs_kp
@pytest.mark.parametrize("version", range(find_coordinator.MIN_VERSION,
                                          find_coordinator.MAX_VERSION + 1))
def test_find_coordinator_request_golden(version):
    for key_type in (find_coordinator.GROUP, find_coordinator.TRANSACTION):
        if version == 0 and key_type:
            with pytest.raises(ValueError):
                find_coordinator.encode_request(version, "tx", key_type)
            continue
        kw = {"key": "tx"} if version < 4 else {"coordinator_keys": ["tx"]}
        if version >= 1:
            kw["key_type"] = key_type
        ours = find_coordinator.encode_request(version, "tx", key_type)
        assert ours == _kp_bytes(FindCoordinatorRequest, version, **kw)


def test_find_coordinator_view():
    old = find_coordinator.RESPONSE.type(0, 0, None, 3, "h", 9092, ())
    assert find_coordinator.coordinator(old, "g") == ("g", 3, "h", 9092, 0, None)
    C = find_coordinator.Coordinator.type
    coords = (C("a", 1, "h1", 1, 0, None), C("b", 2, "h2", 2, 15, "x"))
    new = find_coordinator.RESPONSE.type(0, 0, None, 0, "", 0, coords)
    assert find_coordinator.coordinator(new, "b").node_id == 2
    assert find_coordinator.coordinator(new).key == "a"
    with pytest.raises(KeyError):
        find_coordinator.coordinator(new, "zz")


# ---- headers and frames ----

@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_request_frame_matches_kafka_python(module, version):
    kp_req = KP[module][0]
    for client_id in ("pyprod", None, ""):
        value = samples(module, version, 1, "request")[0]
        try:
            body = module.API.encode_request(version, value)
        except TypeError:
            continue
        req = kp_req.decode(body, version=version)
        req.with_header(correlation_id=2 ** 31 - 1, client_id=client_id)
        theirs = bytes(req.encode(version=version, header=True, framed=True))
        assert header.frame_request(module.API, version, 2 ** 31 - 1, client_id, body) == theirs


@needs_kp
@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_response_frame_matches_kafka_python(module, version):
    kp_resp = KP[module][1]
    value = samples(module, version, 1)[0]
    body = module.API.encode_response(version, value)
    resp = to_kp(kp_resp, module.API.response, value, version)
    resp.API_VERSION = version
    resp.with_header(correlation_id=-5)
    theirs = bytes(resp.encode(header=True, framed=True))
    assert header.write_response_frame(module.API, version, -5, body) == theirs
    cid, decoded = header.decode_response(module, version, theirs[4:], expected_correlation_id=-5)
    assert (cid, decoded) == (-5, value)
    with pytest.raises(CorrelationIdError):
        header.decode_response(module, version, theirs[4:], expected_correlation_id=6)


def test_api_versions_response_header_is_v0():
    assert header.response_header_version(api_versions.API, 3) == 0
    assert header.response_header_version(metadata.API, 9) == 1
    assert header.response_header_version(metadata.API, 8) == 0
    assert header.request_header_version(api_versions.API, 3) == 2
    assert header.request_header_version(produce.API, 8) == 1


def test_frame_size():
    assert header.frame_size(b"\x00\x00\x01\x00") == 256
    for bad in (b"\xff\xff\xff\xff", b"\x00\x00", b""):
        with pytest.raises(KafkaProtocolError):
            header.frame_size(bad)
    with pytest.raises(KafkaProtocolError):
        header.frame_size(b"\x00\x10\x00\x00", max_size=1000)


def test_registry():
    assert sorted(BY_KEY) == [0, 3, 10, 17, 18, 22, 24, 25, 26, 28, 36, 65]
    for key, m in BY_KEY.items():
        assert m.API_KEY == key and m.MIN_VERSION <= m.MAX_VERSION
        assert m.FLEXIBLE_FROM == FLEXIBLE_FROM[key]
    assert (produce.MIN_VERSION, produce.MAX_VERSION, produce.FLEXIBLE_FROM) == (3, 11, 9)
    assert (metadata.FLEXIBLE_FROM, api_versions.FLEXIBLE_FROM, init_producer_id.FLEXIBLE_FROM) \
        == (9, 3, 2)


# ---- ApiVersions specifics ----

def _v0_error_body(ranges):
    w = Writer()
    w.write_int16(35)
    w.write_array_len(len(ranges))
    for k, lo, hi in ranges:
        w.write_int16(k)
        w.write_int16(lo)
        w.write_int16(hi)
    return w.getvalue()


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_api_versions_unsupported_falls_back_to_v0(version):
    for ranges in ([(18, 0, 2)], [], [(18, 0, 3), (0, 3, 9), (3, 0, 12)]):
        resp = api_versions.decode_response(version, _v0_error_body(ranges))
        assert resp.error_code == 35
        assert [tuple(k) for k in resp.api_keys] == ranges
        assert resp.throttle_time_ms == 0


@pytest.mark.parametrize("version", [1, 3, 4])
def test_api_versions_unsupported_in_unknown_layout(version):
    # librdkafka's mock cluster: error, a 1-byte count, one v0 entry, throttle, no tags
    body = bytes.fromhex("00230100120000000200000000")
    resp = api_versions.decode_response(version, body)
    assert resp.error_code == 35 and resp.api_keys == ()
    with pytest.raises(KafkaProtocolError):
        api_versions.decode_response(0, body)  # v0 asked: nothing to fall back to
    with pytest.raises(KafkaProtocolError):  # other errors are not guessed at
        api_versions.decode_response(version, b"\x00\x22" + body[2:])
    # a genuine v3 UNSUPPORTED_VERSION body still decodes as v3
    value = api_versions.RESPONSE.type(35, ((18, 0, 2),), 0, (), -1, (), False)
    assert api_versions.decode_response(3, api_versions.API.encode_response(3, value)) == value


def test_api_versions_negotiation():
    resp = api_versions.API.encode_response(3, {
        "error_code": 0, "throttle_time_ms": 0,
        "api_keys": [(0, 0, 12), (3, 0, 13), (18, 0, 4), (22, 0, 6), (10, 0, 6)]})
    ranges = api_versions.version_ranges(api_versions.decode_response(3, resp))
    assert api_versions.pick_version(produce, ranges) == 11
    assert api_versions.pick_version(metadata, ranges) == 13
    assert api_versions.pick_version(init_producer_id, ranges) == 5
    assert api_versions.pick_version(produce, {0: (0, 8)}) == 8
    from pyprod.errors import IncompatibleBrokerVersion
    with pytest.raises(IncompatibleBrokerVersion):
        api_versions.pick_version(produce, {0: (0, 2)})
    with pytest.raises(IncompatibleBrokerVersion):
        api_versions.pick_version(produce, {})


def test_api_versions_software_name_checked():
    with pytest.raises(ValueError):
        api_versions.encode_request(3, "bad name", "1.0")
    with pytest.raises(ValueError):
        api_versions.encode_request(3, "ok", "-1")
    assert api_versions.encode_request(2, "bad name", "x") == b""


def test_produce_v10_tagged_fields_and_unknown_tags():
    LE = produce.LeaderIdAndEpoch.type
    part = produce.PartitionResponse.type(2, 6, -1, -1, 0, (), "not leader", LE(4, 17))
    NE = produce.NodeEndpoint.type
    value = produce.RESPONSE.type((produce.TopicResponse.type("t", (part,)),), 0,
                                  (NE(4, "b4", 9093, None),))
    data = produce.API.encode_response(10, value)
    assert produce.decode_response(10, data) == value
    # the same fields at v9 are unknown tags: skipped
    v9 = produce.decode_response(9, data)
    assert v9.node_endpoints == () and v9.responses[0].partition_responses[0].current_leader is None
    # an unknown tag (7) inside the top-level tag section is skipped at v10 too
    w = Writer()
    w.write_uvarint(2)
    w.write_uvarint(0)
    inner = Writer()
    produce.RESPONSE.fields[2].writer(10, True)(inner, value.node_endpoints)
    w.write_uvarint(len(inner))
    w.write_raw(inner.getvalue())
    w.write_uvarint(7)
    w.write_uvarint(3)
    w.write_raw(b"abc")
    plain = produce.API.encode_response(10, value._replace(node_endpoints=()))
    assert plain.endswith(b"\x00")
    resp = produce.decode_response(10, plain[:-1] + w.getvalue())
    assert resp == value


# ---- malformed input: always KafkaProtocolError ----

@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_every_truncation_raises_protocol_error(module, version):
    for value in samples(module, version, 2):
        data = module.API.encode_response(version, value)
        for n in range(len(data)):
            with pytest.raises(KafkaProtocolError):
                module.decode_response(version, data[:n])
        with pytest.raises(KafkaProtocolError):
            module.decode_response(version, data + b"\x00")  # trailing garbage


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_trailing_bytes_allowed_when_not_strict(module, version):
    value = samples(module, version, 1)[0]
    data = module.API.encode_response(version, value) + b"\x00\x01"
    assert module.decode_response(version, data, strict=False) == value
    frame = header.write_response_frame(module.API, version, 3, data)
    assert header.decode_response(module, version, frame[4:], strict=False) == (3, value)
    with pytest.raises(KafkaProtocolError, match="trailing"):
        header.decode_response(module, version, frame[4:])


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_truncated_frames_raise_protocol_error(module, version):
    value = samples(module, version, 1)[0]
    frame = header.write_response_frame(module.API, version, 9,
                                        module.API.encode_response(version, value))
    for n in range(4, len(frame)):
        with pytest.raises(KafkaProtocolError):
            header.decode_response(module, version, frame[4:n])


@pytest.mark.parametrize("module,version", CASES, ids=IDS)
def test_corrupted_bytes_never_raise_other_errors(module, version):
    rng = random.Random(version)
    for value in samples(module, version, 2):
        data = bytearray(module.API.encode_response(version, value))
        for _ in range(150):
            bad = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(bad))
                bad[i] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.getrandbits(8)])
            try:
                module.decode_response(version, bytes(bad))
            except KafkaProtocolError:
                pass


def test_absurd_lengths():
    # ProduceResponse v3 claiming 2**31-1 topics in 8 bytes
    with pytest.raises(KafkaProtocolError, match="cannot fit"):
        produce.decode_response(3, b"\x7f\xff\xff\xff\x00\x00\x00\x00")
    # negative array length other than -1
    with pytest.raises(KafkaProtocolError, match="negative"):
        produce.decode_response(3, b"\xff\xff\xff\xfe\x00\x00\x00\x00")
    # null array where the schema doesn't allow one
    with pytest.raises(KafkaProtocolError, match="null"):
        produce.decode_response(3, b"\xff\xff\xff\xff\x00\x00\x00\x00")
    # flexible: compact count 2**32-2 from a 5-byte varint
    with pytest.raises(KafkaProtocolError):
        metadata.decode_response(9, b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + bytes(8))


def test_decode_rejects_unsupported_versions():
    with pytest.raises(ValueError):
        produce.decode_response(2, b"")
    with pytest.raises(ValueError):
        metadata.decode_response(14, b"")
    with pytest.raises(TypeError):
        metadata.decode_response(1, 12345)


def test_reader_inputs():
    value = samples(init_producer_id, 2, 1)[0]
    data = init_producer_id.API.encode_response(2, value)
    for d in (data, bytearray(data), memoryview(data), Reader(data)):
        assert init_producer_id.decode_response(2, d) == value
