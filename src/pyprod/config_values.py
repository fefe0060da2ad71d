"""Config values given as text (Java properties, JAAS options, token claims), read the same way
by config and by the SASL mechanisms that config checks."""
from pyprod.errors import KafkaConfigurationError


def number_from_text(text):
    """int, else float, of a config value given as text; KafkaConfigurationError otherwise."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise KafkaConfigurationError("expected a number, got text") from None
