import inspect
import pickle

import pytest

from pyprod import errors as E

try:
    import kafka
    import kafka.errors as KE
    KP3 = int(kafka.__version__.split(".")[0]) >= 3
except ImportError:  # the comparisons skip; our own checks still run
    KE, KP3 = None, False


def _kafka_python_error_classes():
    if not KP3:
        return []
    return [(n, o) for n, o in vars(KE).items()
            if inspect.isclass(o) and issubclass(o, KE.KafkaError)]


@pytest.mark.skipif(not KP3, reason="compares against kafka-python 3.x")
@pytest.mark.parametrize("name,theirs", _kafka_python_error_classes())
def test_same_name_errno_and_flags(name, theirs):
    ours = getattr(E, name, None)
    assert ours is not None, "missing %s" % name
    assert getattr(ours, "errno", None) == getattr(theirs, "errno", None)
    assert ours.retriable == theirs.retriable
    assert ours.invalid_metadata == theirs.invalid_metadata
    if issubclass(theirs, KE.BrokerResponseError):
        assert ours.message == theirs.message
        assert issubclass(ours, E.BrokerResponseError)
    # every kafka-python base class is also our base class (same name)
    for base in theirs.__mro__:
        if base.__module__ == KE.__name__:
            assert issubclass(ours, getattr(E, base.__name__)), (name, base.__name__)


@pytest.mark.skipif(not KP3, reason="compares against kafka-python 3.x")
def test_for_code_matches_kafka_python():
    for code, theirs in KE.kafka_errors.items():
        if code is None:
            continue
        assert E.for_code(code).__name__ == theirs.__name__


def test_for_code_round_trip():
    for code, cls in E.kafka_errors.items():
        assert cls.errno == code
        assert E.for_code(code) is cls
    assert E.for_code(0) is E.NoError
    assert E.for_code(-1) is E.UnknownError


def test_producer_relevant_codes():
    expect = {
        E.CorruptRecordError: 2, E.UnknownTopicOrPartitionError: 3,
        E.NotLeaderForPartitionError: 6, E.MessageSizeTooLargeError: 10,
        E.NotEnoughReplicasError: 19, E.NotEnoughReplicasAfterAppendError: 20,
        E.TopicAuthorizationFailedError: 29, E.UnsupportedVersionError: 35,
        E.OutOfOrderSequenceNumberError: 45, E.DuplicateSequenceNumberError: 46,
        E.InvalidProducerEpochError: 47, E.UnknownProducerIdError: 59,
        E.InvalidRecordError: 87, E.ProducerFencedError: 90,
        E.TransactionAbortableError: 120, E.RebootstrapRequiredError: 129,
    }
    for cls, code in expect.items():
        assert cls.errno == code and E.for_code(code) is cls
    assert E.CorruptRecordException is E.CorruptRecordError
    assert E.NotLeaderOrFollowerError is E.NotLeaderForPartitionError
    assert E.NotLeaderForPartitionError.retriable and E.NotLeaderForPartitionError.invalid_metadata
    assert not E.MessageSizeTooLargeError.retriable
    assert issubclass(E.IncompatibleBrokerVersion, E.UnsupportedVersionError)
    assert issubclass(E.KafkaTimeoutError, E.RetriableError)


def test_unknown_code():
    cls = E.for_code(31000)
    assert issubclass(cls, E.UnknownError) and cls.errno == 31000
    assert E.for_code(31000) is cls
    assert "31000" in str(cls("boom"))


def test_error_for_code():
    assert E.error_for_code(0) is None
    err = E.error_for_code(6, "tp")
    assert isinstance(err, E.NotLeaderForPartitionError)
    assert str(err) == "[Error 6] NotLeaderForPartitionError: tp"


def test_str_eq_hash_pickle():
    assert str(E.KafkaTimeoutError()) == "KafkaTimeoutError"
    assert str(E.KafkaTimeoutError("late")) == "KafkaTimeoutError: late"
    assert E.KafkaTimeoutError("a") == E.KafkaTimeoutError("a")
    assert E.KafkaTimeoutError("a") != E.KafkaTimeoutError("b")
    assert len({E.KafkaTimeoutError("a"), E.KafkaTimeoutError("a"), E.StaleMetadata([1])}) == 2
    e = pickle.loads(pickle.dumps(E.MessageSizeTooLargeError("big")))
    assert e == E.MessageSizeTooLargeError("big")
    assert isinstance(E.KafkaError(), Exception)


def test_legacy_names():
    for name in ("NoBrokersAvailable", "AuthenticationMethodNotSupported",
                 "AuthenticationFailedError", "ProtocolError", "AsyncProducerQueueFull",
                 "KafkaUnavailableError", "FailedPayloadsError"):
        assert issubclass(getattr(E, name), E.KafkaError)
    assert E.NoBrokersAvailable.retriable and E.NoBrokersAvailable.invalid_metadata
    assert issubclass(E.SaslAuthenticationFailedError, E.AuthenticationFailedError)
    assert E.AsyncProducerQueueFull(["m"], "full").failed_msgs == ["m"]
