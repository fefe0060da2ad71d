"""kcore's ProduceResponse decoder under fuzzing, on each implementation (the ``k`` fixture), and
the compiled module against its pure twin: the same result or the same exception type. Random
ProduceRequests: both twins write the same bytes, which the REQUEST schema reads back."""
import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcore
from pyprod.errors import KafkaError, KafkaProtocolError
from pyprod.protocol import produce
from tests.harness import fuzz
from tests.harness.fuzz_targets import targets

CI = settings(database=None, derandomize=True, deadline=None, max_examples=400,
              suppress_health_check=[HealthCheck.too_slow])
VERSIONS = range(produce.MIN_VERSION, produce.MAX_VERSION + 1)


def inputs():
    target = targets(pure=True)["produce_codec"]  # only its seeds are used
    generated = st.builds(
        lambda rng, lie, mutated: fuzz.one_input(target, rng, (), lie, mutated),
        st.randoms(use_true_random=False), st.sampled_from((0.0, 0.3, 1.0)),
        st.sampled_from((0.0, 1.0, 1.0)))
    return st.one_of(generated, st.tuples(st.sampled_from(VERSIONS), st.binary(max_size=256)))


def outcome(decode, version, data):
    try:
        return "ok", decode(version, data)
    except KafkaError as e:
        return "error", type(e)


def test_typed_errors_only(k):
    @CI
    @given(inputs())
    def check(case_data):
        version, data = case_data
        outcome(k.decode_produce_response, version, data)  # anything untyped fails the test

    check()


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="needs the compiled kcore.produce_codec")
def test_compiled_and_pure_twins_agree():
    compiled = importlib.import_module("kcore.produce_codec")
    pure = importlib.import_module("kcore.pure.produce_codec")

    @CI
    @given(inputs())
    def check(case_data):
        version, data = case_data
        assert outcome(compiled.decode_produce_response, version, data) == \
            outcome(pure.decode_produce_response, version, data)

    check()


def requests():
    batch = st.tuples(st.sampled_from(("t", "ü", "", "x" * 300)),
                      st.integers(-(1 << 31), (1 << 31) - 1),
                      st.one_of(st.none(), st.binary(max_size=300)))
    return st.tuples(st.sampled_from(VERSIONS), st.sampled_from((-1, 0, 1)),
                     st.integers(-(1 << 31), (1 << 31) - 1),
                     st.one_of(st.none(), st.text(max_size=20)), st.lists(batch, max_size=8))


def test_request_twins_agree_and_the_schema_reads_them(both):
    @CI
    @given(requests())
    def check(request):
        version, acks, timeout_ms, transactional_id, batches = request
        bodies = [b"".join(bytes(p) for p in impl.encode_produce_body(*request)) for impl in both]
        assert bodies[0] == bodies[1]
        req = produce.API.decode_request(version, bodies[0])
        assert (req.acks, req.timeout_ms, req.transactional_id) == \
            (acks, timeout_ms, transactional_id)
        got = [(t.name, p.index, p.records) for t in req.topic_data for p in t.partition_data]
        order = {t: i for i, t in reversed(list(enumerate(t for t, _, _ in batches)))}
        assert got == sorted(batches, key=lambda b: order[b[0]])  # grouped, first-seen order

    check()


def _v3_partition(count=b"\x00\x00\x00\x01"):
    """A v3 response: one topic "t" with ``count`` partitions (the first one complete)."""
    return b"\x00\x00\x00\x01" + b"\x00\x01t" + count + bytes(22)


CLAIMS = [  # (version, body): a count or length far beyond the bytes that follow
    (3, b"\x7f\xff\xff\xff"),                           # 2^31-1 topics
    (3, b"\x00\x00\x00\x01\x7f\xff" + b"t" * 10),       # a 32767-byte topic name
    (3, _v3_partition(b"\x7f\xff\xff\xff")),            # 2^31-1 partitions
    (8, b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01" + bytes(30) + b"\x7f\xff\xff\xff"),
    (9, b"\x80\x80\x80\x80\x08"),                       # compact: 2^31-1 topics
    (9, b"\xff\xff\xff\xff\x0f"),                       # compact: 2^32-2 topics
    (9, b"\x02\x02t\xff\xff\xff\xff\x0f"),              # 2^32-2 partitions
    (9, b"\x01\x00\x00\x00\x00\xff\xff\xff\xff\x0f"),   # 2^32-1 tagged fields
    (9, b"\x01\x00\x00\x00\x00\x01\x00\xff\xff\xff\xff\x0f"),  # a tagged field of 4 GB
    (9, b"\x01\x00\x00\x00\x00\x80\x80\x80\x80\x80\x01"),      # overlong varint
]


@pytest.mark.parametrize("version,body", CLAIMS)
def test_huge_claims_are_refused_before_allocating(k, version, body):
    result, peak = fuzz.allocation_peak(k.decode_produce_response, version, body)
    assert isinstance(result, KafkaProtocolError), result
    assert peak < 64 * 1024, peak
