"""Exceptions, with kafka-python's names and hierarchy."""


class KafkaError(RuntimeError):
    retriable = False
    # whether metadata should be refreshed on error
    invalid_metadata = False

    def __str__(self):
        if not self.args:
            return self.__class__.__name__
        return "{0}: {1}".format(self.__class__.__name__, super().__str__())


class IllegalStateError(KafkaError):
    pass


class IllegalArgumentError(KafkaError):
    pass


class KafkaConfigurationError(KafkaError):
    pass


class KafkaTimeoutError(KafkaError):
    retriable = True


class CorruptRecordError(KafkaError):
    """Malformed bytes (kafka-python: CorruptRecordException)."""


CorruptRecordException = CorruptRecordError


class UnsupportedCodecError(KafkaError):
    pass


class MessageSizeTooLargeError(KafkaError):
    pass
