"""The client-side exceptions (no broker error code), with kafka-python's names and hierarchy
(see kcore.errors).

Class names, ``errno``, ``retriable`` and ``invalid_metadata`` match kafka-python 3.x
(plus the kafka-python 2.x names that 3.x dropped), so ``except Errors.X`` code ports by
changing the import. Broker error codes map to classes through :func:`for_code`.
"""
from typing import TYPE_CHECKING


class KafkaError(RuntimeError):
    retriable = False
    # whether metadata should be refreshed on error
    invalid_metadata = False

    def __str__(self):
        if not self.args:
            return self.__class__.__name__
        return "{0}: {1}".format(self.__class__.__name__, super().__str__())

    def __eq__(self, other):
        return self.__class__ is other.__class__ and self.args == other.args

    def __hash__(self):
        try:
            return hash((self.__class__, self.args))
        except TypeError:  # unhashable args: equal objects still share a hash
            return hash(self.__class__)


class RetriableError(KafkaError):
    retriable = True


class InvalidMetadataError(RetriableError):
    invalid_metadata = True


# ---- client-side errors (no broker error code) ----

class Cancelled(RetriableError):
    pass


class CommitFailedError(KafkaError):
    def __init__(self, *args):
        if not args:
            args = ("Commit cannot be completed since the group has already"
                    " rebalanced and assigned the partitions to another member.",)
        super().__init__(*args)


class IllegalArgumentError(KafkaError):
    pass


class IllegalStateError(KafkaError):
    pass


class KafkaConfigurationError(KafkaError, ValueError):
    """A bad or unknown config. Also a ValueError: kafka-python raises ValueError for an
    unknown config key, so ``except ValueError`` code keeps working."""


class KafkaConnectionError(InvalidMetadataError):
    pass


class KafkaProtocolError(KafkaError):
    """Bytes from the wire could not be decoded (truncated, malformed, absurd sizes)."""


# kafka-python 2.x name
ProtocolError = KafkaProtocolError


class CorrelationIdError(RetriableError, KafkaProtocolError):
    pass


class InvalidReceiveError(KafkaProtocolError):
    pass


class KafkaTimeoutError(RetriableError):
    pass


class MetadataEmptyBrokerList(RetriableError):
    pass


class NoOffsetForPartitionError(KafkaError):
    pass


class LogTruncationError(KafkaError):
    """The broker's log was truncated past the consumer's position (KIP-320)."""

    def __init__(self, divergent_offsets, *args):
        self.divergent_offsets = divergent_offsets
        super().__init__(*args or ("Detected truncated partitions: %s" % (divergent_offsets,),))


class NodeNotReadyError(RetriableError):
    pass


class UnknownBrokerIdError(KafkaError):
    pass


class BatchDeliveryError(KafkaError):
    """Some records of one KafkaProducer.send_batch call failed (pyprod only).

    ``failures``: [(record index, exception)] in index order; ``failed_count`` and
    ``succeeded_count`` count the call's records."""

    def __init__(self, failures=(), succeeded_count=0, *args):
        self.failures = list(failures)
        self.failed_count = len(self.failures)
        self.succeeded_count = succeeded_count
        if not args:
            first = ", ".join("#%d: %r" % (i, e) for i, e in self.failures[:3])
            more = " ..." if self.failed_count > 3 else ""
            args = ("%d of %d records failed (%s%s)" % (
                self.failed_count, self.failed_count + succeeded_count, first, more),)
        super().__init__(*args)

    def __reduce__(self):
        return type(self), (self.failures, self.succeeded_count) + tuple(self.args)


class QuotaViolationError(KafkaError):
    pass


class StaleMetadata(InvalidMetadataError):
    pass


class TooManyInFlightRequests(RetriableError):
    pass


class UnrecognizedBrokerVersion(KafkaError):
    pass


class UnsupportedCodecError(KafkaError):
    pass


class TransactionAbortedError(KafkaError):
    """Undrained batches failed because the user aborted the transaction (KIP-654)."""
    message = "Failing batch since transaction was aborted"


# ---- kafka-python 2.x names that 3.x dropped (same flags as 2.x) ----

class NoBrokersAvailable(InvalidMetadataError, KafkaTimeoutError):
    """Also a KafkaTimeoutError: when no bootstrap server answers in time, kafka-python 2.x
    raises NoBrokersAvailable and 3.x KafkaTimeoutError; programs for either catch this."""


class KafkaUnavailableError(KafkaError):
    pass


class AuthenticationMethodNotSupported(KafkaError):
    pass


class AuthenticationFailedError(KafkaError):
    pass


class ProxyAuthenticationError(KafkaConnectionError, AuthenticationFailedError):
    """The SOCKS5 proxy (proxy_url) refused our credentials, or wants some we did not
    configure. Not retriable (as a refused SASL or TLS authentication): the producer fails
    fast."""
    retriable = False
    invalid_metadata = False


class SslAuthenticationError(KafkaConnectionError, AuthenticationFailedError):
    """The TLS handshake failed (untrusted or revoked certificate, host-name mismatch, a client
    certificate the broker refused...); ``__cause__`` and ``ssl_error`` hold the ssl.SSLError.
    Not retriable, as Java's SslAuthenticationException."""
    retriable = False
    invalid_metadata = False

    def __init__(self, *args, ssl_error=None):
        super().__init__(*args)
        self.ssl_error = ssl_error


class FailedPayloadsError(KafkaError):
    def __init__(self, payload, *args):
        super().__init__(*args)
        self.payload = payload


class AsyncProducerQueueFull(KafkaError):
    def __init__(self, failed_msgs, *args):
        super().__init__(*args)
        self.failed_msgs = failed_msgs


if not TYPE_CHECKING:  # computed: type checkers take every public name instead
    __all__ = sorted(n for n, v in list(globals().items())
                     if isinstance(v, type) and issubclass(v, BaseException))
