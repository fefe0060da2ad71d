"""tests/compat_aio: pyprod.aio against aiokafka's own producer tests.

aiokafka/ holds a pinned copy of aiokafka's test files, run only by scripts/aiokafka_tests.py
(after the AIOKafkaProducer import swap), never collected here.
"""

collect_ignore = ["aiokafka"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "aiokafka_suite: runs aiokafka's own producer tests against pyprod.aio "
        "(scripts/aiokafka_tests.py: its own Kafka broker); deselect with "
        "-m 'not aiokafka_suite'")
