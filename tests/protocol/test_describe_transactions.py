"""DescribeTransactions (key 65, KIP-664): round trips, hand-written bytes, truncation and
corruption (always KafkaProtocolError), byte identity with kafka-python, and what its handler
makes of each answer (the producer's own state is never touched)."""
import pytest

from pyprod import errors
from pyprod.errors import KafkaProtocolError
from pyprod.protocol import BY_KEY, FLEXIBLE_FROM, describe_transactions as dt, header
from pyprod.transaction_manager import TransactionalRequestResult
from pyprod.txn_request_handlers import TRANSACTION, DescribeTransactionsHandler
from tests.protocol.test_messages import kp_available, needs_kp, samples, to_kp

State, Topic = dt.TransactionState.type, dt.TopicData.type
ONGOING = State(0, "tx", "Ongoing", 60000, 1_700_000_000_123, 7, 3,
                (Topic("a", (0, 2)), Topic("b", ())))
RESPONSE = dt.RESPONSE.type(5, (ONGOING, State(105, "gone", "", 0, -1, -1, -1, ())))


def _i16(n):
    return n.to_bytes(2, "big", signed=True)


def _i32(n):
    return n.to_bytes(4, "big", signed=True)


def _i64(n):
    return n.to_bytes(8, "big", signed=True)


# compact strings and arrays: unsigned varint length + 1; a tag section (0) after each struct
RESPONSE_BYTES = (
    _i32(5) + b"\x03"
    + _i16(0) + b"\x03tx" + b"\x08Ongoing" + _i32(60000) + _i64(1_700_000_000_123) + _i64(7)
    + _i16(3) + b"\x03" + b"\x02a" + b"\x03" + _i32(0) + _i32(2) + b"\x00"
    + b"\x02b" + b"\x01" + b"\x00" + b"\x00"
    + _i16(105) + b"\x05gone" + b"\x01" + _i32(0) + _i64(-1) + _i64(-1) + _i16(-1) + b"\x01"
    + b"\x00"
    + b"\x00")


def test_request_known_bytes():
    assert dt.encode_request(0, ["tx"]) == b"\x02\x03tx\x00"
    assert dt.encode_request(0, []) == b"\x01\x00"
    assert dt.encode_request(0, ("a", "bc")) == b"\x03\x02a\x03bc\x00"
    assert dt.API.decode_request(0, dt.encode_request(0, ["tx", "ü"])) == \
        dt.REQUEST.type(("tx", "ü"))


def test_request_refuses_a_single_string_and_other_versions():
    with pytest.raises(TypeError, match="list of str"):
        dt.encode_request(0, "tx")
    with pytest.raises(ValueError):
        dt.encode_request(1, ["tx"])
    with pytest.raises(ValueError):
        dt.decode_response(1, RESPONSE_BYTES)


def test_response_known_bytes():
    assert dt.decode_response(0, RESPONSE_BYTES) == RESPONSE
    assert dt.API.encode_response(0, RESPONSE) == RESPONSE_BYTES


def test_response_round_trip_truncation_and_trailing_bytes():
    for value in samples(dt, 0) + [RESPONSE]:
        data = dt.API.encode_response(0, value)
        assert dt.decode_response(0, data) == value
        assert dt.decode_response(0, memoryview(bytearray(data))) == value
        assert dt.decode_response(0, data + b"\x00", strict=False) == value
        for n in range(len(data)):
            with pytest.raises(KafkaProtocolError):
                dt.decode_response(0, data[:n])
        with pytest.raises(KafkaProtocolError, match="trailing"):
            dt.decode_response(0, data + b"\x00")


@pytest.mark.parametrize("bad", [
    _i32(0) + b"\x02" + _i16(0) + b"\x03\xff\xfe",            # transactional id: bad UTF-8
    _i32(0) + b"\x00",                                         # null array: not nullable
    _i32(0) + b"\xff\xff\xff\xff\x0f",                         # absurd array length
    _i32(0) + b"\x80\x80\x80\x80\x80\x80",                     # overlong varint
])
def test_response_corruption_is_a_protocol_error(bad):
    with pytest.raises(KafkaProtocolError):
        dt.decode_response(0, bad)


def test_state_of():
    assert dt.state_of(RESPONSE, "tx") is ONGOING
    assert dt.state_of(RESPONSE, "gone").error_code == 105
    with pytest.raises(KeyError, match="nope"):
        dt.state_of(RESPONSE, "nope")


def test_registry_and_headers():
    assert BY_KEY[65] is dt and dt.API_KEY == 65
    assert FLEXIBLE_FROM[65] == dt.FLEXIBLE_FROM == 0
    assert (dt.MIN_VERSION, dt.MAX_VERSION) == (0, 0)
    assert header.request_header_version(dt.API, 0) == 2
    assert header.response_header_version(dt.API, 0) == 1
    frame = header.write_response_frame(dt.API, 0, 11, RESPONSE_BYTES)
    assert header.decode_response(dt, 0, frame[4:]) == (11, RESPONSE)


if kp_available:
    from kafka.protocol.admin.transactions import (DescribeTransactionsRequest,
                                                   DescribeTransactionsResponse)


@needs_kp
def test_bytes_match_kafka_python():
    for value in samples(dt, 0, which="request"):
        theirs = to_kp(DescribeTransactionsRequest, dt.REQUEST, value, 0).encode(version=0)
        assert dt.API.encode_request(0, value) == bytes(theirs)
    for value in samples(dt, 0) + [RESPONSE]:
        theirs = to_kp(DescribeTransactionsResponse, dt.RESPONSE, value, 0).encode(version=0)
        assert dt.API.encode_response(0, value) == bytes(theirs)
    theirs = DescribeTransactionsRequest(transactional_ids=["tx"]).encode(version=0)
    assert dt.encode_request(0, ["tx"]) == bytes(theirs)


# ---- the handler: each answer's meaning ----

class _Txn:
    """The TransactionManager calls a DescribeTransactionsHandler may make."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a, **kw: self.calls.append((name,) + a)


def _answer(state):
    txn = _Txn()
    handler = DescribeTransactionsHandler(txn, TransactionalRequestResult("Describe"), "tx")
    handler.on_answer(dt.RESPONSE.type(0, (state,) if state is not None else ()))
    return txn, handler


def test_handler_found_and_not_found():
    assert DescribeTransactionsHandler(_Txn(), None, "tx").body(0) == b"\x02\x03tx\x00"
    txn, handler = _answer(ONGOING)
    assert handler.key == "tx" and handler.coordinator == TRANSACTION
    assert handler.result.wait(0) and handler.result.value is ONGOING and txn.calls == []
    txn, handler = _answer(State(105, "tx", "", 0, -1, -1, -1, ()))
    assert handler.result.wait(0) and handler.result.value is None and txn.calls == []


@pytest.mark.parametrize("code, calls", [(16, ["lookup_coordinator", "retry"]),   # NOT_COORDINATOR
                                         (15, ["lookup_coordinator", "retry"]),   # NOT_AVAILABLE
                                         (14, ["retry"])])                        # LOADING
def test_handler_looks_the_coordinator_up_again_or_retries(code, calls):
    txn, handler = _answer(State(code, "tx", "", 0, -1, -1, -1, ()))
    assert [c[0] for c in txn.calls] == calls and not handler.result.is_done


@pytest.mark.parametrize("state, error", [
    (State(53, "tx", "", 0, -1, -1, -1, ()), errors.TransactionalIdAuthorizationFailedError),
    (None, KafkaProtocolError),   # no state for the id asked about
])
def test_handler_errors_fail_the_request_only(state, error):
    txn, handler = _answer(state)
    assert txn.calls == []  # neither fatal() nor abortable(): the producer goes on
    with pytest.raises(error):
        handler.result.wait(0)


def test_a_broker_without_the_api_fails_the_request_only():
    txn = _Txn()
    handler = DescribeTransactionsHandler(txn, TransactionalRequestResult("Describe"), "tx")
    handler.unsupported(errors.IncompatibleBrokerVersion("broker does not support it"))
    assert txn.calls == []
    with pytest.raises(errors.UnsupportedVersionError):
        handler.result.wait(0)
