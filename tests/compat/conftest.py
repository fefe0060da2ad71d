"""tests/compat: pyprod against other clients' own test suites.

kafka_python/ holds a pinned copy of kafka-python's test files, run only by
scripts/kafka_python_tests.py (after the KafkaProducer import swap), never collected here.
"""

collect_ignore = ["kafka_python"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kafka_python_suite: runs kafka-python's own producer tests against pyprod "
        "(scripts/kafka_python_tests.py: its own Kafka broker, about 15 s); deselect with "
        "-m 'not kafka_python_suite'")
