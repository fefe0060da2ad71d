"""Typed errors only: every target, over random bytes and mutated valid messages, returns a value
or raises a pyprod.errors.KafkaError subclass (never IndexError, ValueError, RecursionError...).
The produce codec's targets are in test_fuzz_produce_codec.py (both implementations)."""
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyprod.protocol import sasl_authenticate
from tests.harness import fuzz
from tests.harness.fuzz_targets import MESSAGE_MODULES, targets

CI = settings(database=None, derandomize=True, deadline=None, max_examples=250,
              suppress_health_check=[HealthCheck.too_slow])
NAMES = [n for n in targets() if n != "produce_codec"]
NO_SLOW_CHECK = float("inf")  # no timed assertions in tests


def fuzz_inputs(target):
    """(case, data): a seed, mutated or not, with false lengths or not; or random bytes."""
    generated = st.builds(
        lambda rng, lie, mutated: fuzz.one_input(target, rng, (), lie, mutated),
        st.randoms(use_true_random=False), st.sampled_from((0.0, 0.3, 1.0)),
        st.sampled_from((0.0, 1.0, 1.0)))
    random_bytes = st.tuples(st.sampled_from(target.cases), st.binary(max_size=256))
    return st.one_of(generated, random_bytes)


def assert_handles(target, case, data):
    finding = fuzz.check(target, case, data, NO_SLOW_CHECK)
    assert finding is None, finding


@pytest.mark.parametrize("name", NAMES)
def test_typed_errors_only(fuzz_targets, name):
    target = fuzz_targets[name]

    @CI
    @given(fuzz_inputs(target))
    def check(case_data):
        assert_handles(target, *case_data)

    check()


@pytest.mark.parametrize("name", ["response", "connection"] +
                         [m.__name__.rsplit(".", 1)[-1] for m in MESSAGE_MODULES])
def test_unmutated_seeds_decode(fuzz_targets, name):
    """The generator's messages are valid (so the mutations start deep in the decoders),
    unknown tagged fields and non-minimal varints included."""
    target = fuzz_targets[name]
    rng = random.Random(name)
    for case in target.cases:
        for _ in range(5):
            target.run(case, target.seed(case, rng, 0.0))


def test_every_truncation_and_bit_flip_of_a_response(fuzz_targets):
    """Exhaustive on a few messages: each prefix, each single bit flipped."""
    rng = random.Random(5)
    for name in ("response", "metadata", "api_versions", "network_client"):
        target = fuzz_targets[name]
        for case in rng.sample(target.cases, 3):
            data = target.seed(case, rng, 0.0)
            for n in range(len(data)):
                assert_handles(target, case, data[:n])
            for bit in range(len(data) * 8):
                flipped = bytearray(data)
                flipped[bit // 8] ^= 1 << (bit % 8)
                assert_handles(target, case, bytes(flipped))


FOUND = [  # (target, case, input) the long run found (see bench/results/fuzz_run.txt)
    # UNSUPPORTED_VERSION naming ApiVersions v0..v-468: the client asked ApiVersions v-468
    # (ValueError from Api.check); it now steps down to v0
    ("network_client", ("api_versions", 2), "000000070023000000020012fffffe2c001b80000286"),
    # an OAUTHBEARER error challenge nested deeper than the JSON parser goes (RecursionError)
    ("oauthbearer", None, "5b" * 100_000),
    ("sasl", ("OAUTHBEARER", 36, 1), sasl_authenticate.API.encode_response(1, {
        "error_code": 0, "auth_bytes": b"[" * 100_000, "session_lifetime_ms": 0}).hex()),
]


@pytest.mark.parametrize("name,case,data", FOUND, ids=[f[0] for f in FOUND])
def test_found_inputs(fuzz_targets, name, case, data):
    if isinstance(case, tuple) and case[0] == "api_versions":
        from pyprod.protocol import api_versions
        case = (api_versions,) + case[1:]
    assert_handles(fuzz_targets[name], case, bytes.fromhex(data))
