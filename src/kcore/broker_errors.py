"""Broker error codes as exceptions (kafka-python's names, errno values and flags); for_code
maps a code to its class. The client-side errors are in kcore.client_errors."""
from typing import TYPE_CHECKING

from kcore.client_errors import (AuthenticationFailedError, InvalidMetadataError, KafkaError,
                          RetriableError)

# ---- broker error codes ----

class BrokerResponseError(KafkaError):
    errno = None
    message = None
    description = None

    def __str__(self):
        """Add errno to standard KafkaError str"""
        return "[Error {0}] {1}".format(self.errno, super().__str__())


class AuthorizationError(BrokerResponseError):
    pass


class NoError(BrokerResponseError):
    errno, message = 0, "NO_ERROR"


class UnknownError(BrokerResponseError):
    errno, message = -1, "UNKNOWN"


class OffsetOutOfRangeError(BrokerResponseError):
    errno, message = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(BrokerResponseError):
    """Also raised client-side for malformed record bytes."""
    errno, message = 2, "CORRUPT_MESSAGE"


CorruptRecordException = CorruptRecordError  # kafka-python alias


class UnknownTopicOrPartitionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 3, "UNKNOWN_TOPIC_OR_PARTITION"


class InvalidFetchRequestError(BrokerResponseError):
    errno, message = 4, "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 5, "LEADER_NOT_AVAILABLE"


class NotLeaderForPartitionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 6, "NOT_LEADER_FOR_PARTITION"


NotLeaderOrFollowerError = NotLeaderForPartitionError  # the code"s name since Kafka 2.6


class RequestTimedOutError(RetriableError, BrokerResponseError):
    errno, message = 7, "REQUEST_TIMED_OUT"


class BrokerNotAvailableError(BrokerResponseError):
    errno, message = 8, "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 9, "REPLICA_NOT_AVAILABLE"


class MessageSizeTooLargeError(BrokerResponseError):
    errno, message = 10, "MESSAGE_SIZE_TOO_LARGE"


class StaleControllerEpochError(BrokerResponseError):
    errno, message = 11, "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(BrokerResponseError):
    errno, message = 12, "OFFSET_METADATA_TOO_LARGE"


class NetworkExceptionError(InvalidMetadataError, BrokerResponseError):
    errno, message = 13, "NETWORK_EXCEPTION"


class CoordinatorLoadInProgressError(RetriableError, BrokerResponseError):
    errno, message = 14, "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(RetriableError, BrokerResponseError):
    errno, message = 15, "COORDINATOR_NOT_AVAILABLE"


class NotCoordinatorError(RetriableError, BrokerResponseError):
    errno, message = 16, "NOT_COORDINATOR"


class InvalidTopicError(BrokerResponseError):
    errno, message = 17, "INVALID_TOPIC"


class RecordListTooLargeError(BrokerResponseError):
    errno, message = 18, "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(RetriableError, BrokerResponseError):
    errno, message = 19, "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(RetriableError, BrokerResponseError):
    errno, message = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class InvalidRequiredAcksError(BrokerResponseError):
    errno, message = 21, "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerResponseError):
    errno, message = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(BrokerResponseError):
    errno, message = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(BrokerResponseError):
    errno, message = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(BrokerResponseError):
    errno, message = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(BrokerResponseError):
    errno, message = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(BrokerResponseError):
    errno, message = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(BrokerResponseError):
    errno, message = 28, "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(AuthorizationError):
    errno, message = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(AuthorizationError):
    errno, message = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(AuthorizationError):
    errno, message = 31, "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerResponseError):
    errno, message = 32, "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerResponseError):
    errno, message = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerResponseError):
    errno, message = 34, "ILLEGAL_SASL_STATE"


class UnsupportedVersionError(BrokerResponseError):
    errno, message = 35, "UNSUPPORTED_VERSION"


class IncompatibleBrokerVersion(UnsupportedVersionError):
    """Synthetic error raised by the client (no version in common with the broker)."""


class TopicAlreadyExistsError(BrokerResponseError):
    errno, message = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerResponseError):
    errno, message = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerResponseError):
    errno, message = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicationAssignmentError(BrokerResponseError):
    errno, message = 39, "INVALID_REPLICATION_ASSIGNMENT"


class InvalidConfigurationError(BrokerResponseError):
    errno, message = 40, "INVALID_CONFIG"


class NotControllerError(RetriableError, BrokerResponseError):
    errno, message = 41, "NOT_CONTROLLER"


class InvalidRequestError(BrokerResponseError):
    errno, message = 42, "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerResponseError):
    errno, message = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerResponseError):
    errno, message = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerResponseError):
    errno, message = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerResponseError):
    errno, message = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerResponseError):
    errno, message = 47, "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(BrokerResponseError):
    errno, message = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerResponseError):
    errno, message = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerResponseError):
    errno, message = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(RetriableError, BrokerResponseError):
    errno, message = 51, "CONCURRENT_TRANSACTIONS"


class TransactionCoordinatorFencedError(BrokerResponseError):
    errno, message = 52, "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(AuthorizationError):
    errno, message = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerResponseError):
    errno, message = 54, "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerResponseError):
    errno, message = 55, "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(InvalidMetadataError, BrokerResponseError):
    errno, message = 56, "KAFKA_STORAGE_ERROR"


class LogDirNotFoundError(BrokerResponseError):
    errno, message = 57, "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationFailedError):
    errno, message = 58, "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(BrokerResponseError):
    errno, message = 59, "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerResponseError):
    errno, message = 60, "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(BrokerResponseError):
    errno, message = 61, "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(BrokerResponseError):
    errno, message = 62, "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    errno, message = 63, "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    errno, message = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(AuthorizationError):
    errno, message = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(BrokerResponseError):
    errno, message = 66, "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(BrokerResponseError):
    errno, message = 67, "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(BrokerResponseError):
    errno, message = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(BrokerResponseError):
    errno, message = 69, "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(RetriableError, BrokerResponseError):
    errno, message = 70, "FETCH_SESSION_ID_NOT_FOUND"


class InvalidFetchSessionEpochError(RetriableError, BrokerResponseError):
    errno, message = 71, "INVALID_FETCH_SESSION_EPOCH"


class ListenerNotFoundError(InvalidMetadataError, BrokerResponseError):
    errno, message = 72, "LISTENER_NOT_FOUND"


class TopicDeletionDisabledError(BrokerResponseError):
    errno, message = 73, "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(InvalidMetadataError, BrokerResponseError):
    errno, message = 74, "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(InvalidMetadataError, BrokerResponseError):
    errno, message = 75, "UNKNOWN_LEADER_EPOCH"


class UnsupportedCompressionTypeError(BrokerResponseError):
    errno, message = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(BrokerResponseError):
    errno, message = 77, "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(RetriableError, BrokerResponseError):
    errno, message = 78, "OFFSET_NOT_AVAILABLE"


class MemberIdRequiredError(BrokerResponseError):
    errno, message = 79, "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 80, "PREFERRED_LEADER_NOT_AVAILABLE"


class GroupMaxSizeReachedError(BrokerResponseError):
    errno, message = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(BrokerResponseError):
    errno, message = 82, "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(InvalidMetadataError, BrokerResponseError):
    errno, message = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"


class ElectionNotNeededError(InvalidMetadataError, BrokerResponseError):
    errno, message = 84, "ELECTION_NOT_NEEDED"


class NoReassignmentInProgressError(BrokerResponseError):
    errno, message = 85, "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(BrokerResponseError):
    errno, message = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(BrokerResponseError):
    errno, message = 87, "INVALID_RECORD"


class UnstableOffsetCommitError(RetriableError, BrokerResponseError):
    errno, message = 88, "UNSTABLE_OFFSET_COMMIT"


class ThrottlingQuotaExceededError(RetriableError, BrokerResponseError):
    errno, message = 89, "THROTTLING_QUOTA_EXCEEDED"


class ProducerFencedError(BrokerResponseError):
    errno, message = 90, "PRODUCER_FENCED"


class ResourceNotFoundError(BrokerResponseError):
    errno, message = 91, "RESOURCE_NOT_FOUND"


class DuplicateResourceError(BrokerResponseError):
    errno, message = 92, "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(BrokerResponseError):
    errno, message = 93, "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(BrokerResponseError):
    errno, message = 94, "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(BrokerResponseError):
    errno, message = 95, "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(BrokerResponseError):
    errno, message = 96, "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(BrokerResponseError):
    errno, message = 97, "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(BrokerResponseError):
    errno, message = 98, "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(BrokerResponseError):
    errno, message = 99, "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno, message = 100, "UNKNOWN_TOPIC_ID"


class DuplicateBrokerRegistrationError(BrokerResponseError):
    errno, message = 101, "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(BrokerResponseError):
    errno, message = 102, "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(InvalidMetadataError, BrokerResponseError):
    errno, message = 103, "INCONSISTENT_TOPIC_ID"


class InconsistentClusterIdError(BrokerResponseError):
    errno, message = 104, "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(BrokerResponseError):
    errno, message = 105, "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(RetriableError, BrokerResponseError):
    errno, message = 106, "FETCH_SESSION_TOPIC_ID_ERROR"


class IneligibleReplicaError(BrokerResponseError):
    errno, message = 107, "INELIGIBLE_REPLICA"


class NewLeaderElectedError(BrokerResponseError):
    errno, message = 108, "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(BrokerResponseError):
    errno, message = 109, "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(BrokerResponseError):
    errno, message = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(BrokerResponseError):
    errno, message = 111, "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(BrokerResponseError):
    errno, message = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(BrokerResponseError):
    errno, message = 113, "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(BrokerResponseError):
    errno, message = 114, "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(BrokerResponseError):
    errno, message = 115, "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(BrokerResponseError):
    errno, message = 116, "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(BrokerResponseError):
    errno, message = 117, "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(BrokerResponseError):
    errno, message = 118, "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(BrokerResponseError):
    errno, message = 119, "INVALID_REGISTRATION"


class TransactionAbortableError(BrokerResponseError):
    errno, message = 120, "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(BrokerResponseError):
    errno, message = 121, "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(RetriableError, BrokerResponseError):
    errno, message = 122, "SHARE_SESSION_NOT_FOUND"


class InvalidShareSessionEpochError(RetriableError, BrokerResponseError):
    errno, message = 123, "INVALID_SHARE_SESSION_EPOCH"


class FencedStateEpochError(BrokerResponseError):
    errno, message = 124, "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(BrokerResponseError):
    errno, message = 125, "INVALID_VOTER_KEY"


class DuplicateVoterError(BrokerResponseError):
    errno, message = 126, "DUPLICATE_VOTER"


class VoterNotFoundError(BrokerResponseError):
    errno, message = 127, "VOTER_NOT_FOUND"


# Codes newer than kafka-python 3.0.12 (Kafka 4.x), named after the Java error in the same style.

class InvalidRegularExpressionError(BrokerResponseError):
    errno, message = 128, "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(BrokerResponseError):
    errno, message = 129, "REBOOTSTRAP_REQUIRED"


class StreamsInvalidTopologyError(BrokerResponseError):
    errno, message = 130, "STREAMS_INVALID_TOPOLOGY"


class StreamsInvalidTopologyEpochError(BrokerResponseError):
    errno, message = 131, "STREAMS_INVALID_TOPOLOGY_EPOCH"


class StreamsTopologyFencedError(BrokerResponseError):
    errno, message = 132, "STREAMS_TOPOLOGY_FENCED"


class ShareSessionLimitReachedError(BrokerResponseError):
    errno, message = 133, "SHARE_SESSION_LIMIT_REACHED"


def _collect():
    table = {}
    for obj in list(globals().values()):
        if (isinstance(obj, type) and issubclass(obj, BrokerResponseError)
                and obj.errno is not None):
            table.setdefault(obj.errno, obj)  # definition order: the canonical class wins
    return table


kafka_errors = _collect()
_unrecognized = {}


def for_code(error_code):
    """Class for a broker error code; 0 gives NoError.

    An unknown code gives an ``UnrecognizedBrokerError`` subclass of UnknownError carrying
    that errno (one class per code, reused).
    """
    cls = kafka_errors.get(error_code)
    if cls is None:
        cls = _unrecognized.get(error_code)
        if cls is None:
            cls = type("UnrecognizedBrokerError", (UnknownError,), {"errno": error_code})
            _unrecognized[error_code] = cls
    return cls


def error_for_code(error_code, *args):
    """An exception instance for a non-zero code, None for 0 (NONE)."""
    if error_code == 0:
        return None
    return for_code(error_code)(*args)


if not TYPE_CHECKING:  # computed: type checkers take every public name instead
    __all__ = sorted(n for n, v in list(globals().items())
                     if isinstance(v, type) and issubclass(v, BrokerResponseError)) + [
        "for_code", "error_for_code", "kafka_errors"]
