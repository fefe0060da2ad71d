"""compare.py's workloads and clients: the names, each workload's settings, what is not run."""
from __future__ import annotations

PARTITIONS = 6
LINGER_MS = 5
LATENCY_RATE = 50_000
KEYS = 10_000  # distinct keys of the keyed workload
KEY_SIZE = 10  # b"key-%06d"

# Steady state: every run is long enough that the client's buffer holds under 5% of its records.
BUFFER_MEMORY = 32 * 1024 * 1024  # pyprod, kafka-python, aiokafka and Java's default
CONFLUENT_QUEUE = 100_000  # librdkafka's queue.buffering.max.messages default
OVERHEAD = 7  # a record's own bytes in a batch beside key and value, at least
STEADY_SHARE = 0.05

CLIENTS = ("pyprod", "confluent-kafka", "kafka-python", "aiokafka", "java")
ALIASES = {"confluent": "confluent-kafka", "kafka_python": "kafka-python"}
# records per run relative to --records: the slow Python clients run fewer (never fewer than
# steady state needs)
CLIENT_SHARE = {"kafka-python": 0.1, "aiokafka": 0.2}

WORKLOADS = {
    "100B": {"value_size": 100},
    "100B-keyed": {"value_size": 100, "keyed": True},
    "100B-callbacks": {"value_size": 100, "callbacks": True},
    "1KiB": {"value_size": 1024, "share": 0.25},
    "lz4": {"value_size": 100, "compression": "lz4"},
    "zstd": {"value_size": 100, "compression": "zstd"},
    "acks-all-idempotent": {"value_size": 100, "acks": "all", "idempotent": True},
    "sasl_ssl": {"value_size": 100, "security": "SASL_SSL"},
    "transactional": {"value_size": 100, "acks": "all", "idempotent": True,
                      "transaction_size": 10000},
}
QUICK_WORKLOADS = ("100B", "lz4")
DESCRIBE = {
    "100B": "100-byte values, keyless",
    "100B-keyed": f"100-byte values, {KEYS:,} distinct keys",
    "100B-callbacks": "100-byte values, keyless, a callback and an errback on every record "
                      "(confluent-kafka: on_delivery on every produce(), poll(0) after every "
                      "1,000 records)",
    "1KiB": "1 KiB values, keyless (a quarter of the records)",
    "lz4": "100-byte values, lz4",
    "zstd": "100-byte values, zstd",
    "acks-all-idempotent": "100-byte values, acks=all, idempotence on",
    "sasl_ssl": "100-byte values, keyless, SASL_SSL with SCRAM-SHA-512 (TLS 1.3)",
    "transactional": "100-byte values, keyless, transactions of 10,000 records, each "
                     "committed (acks=all, idempotence on)",
}
SKIP = {("java", "100B-keyed"): "ProducerPerformance sends no keys",
        ("java", "100B-callbacks"): "ProducerPerformance gives every record a callback: "
                                    "its 100B row",
        ("java", "sasl_ssl"): "not wired to the secured listener",
        ("aiokafka", "sasl_ssl"): "not wired to the secured listener",
        ("java", "transactional"): "ProducerPerformance is not run transactionally here",
        ("aiokafka", "transactional"): "not wired to transactions here"}


def workload_spec(name: str, batch_size=None) -> dict:
    w = WORKLOADS[name]
    return {"workload": name, "value_size": w["value_size"], "keyed": w.get("keyed", False),
            "compression": w.get("compression"), "acks": w.get("acks", 1),
            "idempotent": w.get("idempotent", False), "linger_ms": LINGER_MS,
            "batch_size": batch_size, "security": w.get("security"),
            "callbacks": w.get("callbacks", False),
            "transaction_size": w.get("transaction_size")}
# clients that do not run against librdkafka's mock cluster (bench/_mock_broker.py)
MOCK_SKIP = {"kafka-python": "kafka-python 3.0.12 gets no metadata from the mock cluster "
                             "(KafkaTimeoutError: Failed to update metadata after 60.0 secs)",
             "java": "Java's producer 4.3 finds no topic in the mock cluster's metadata "
                     "(TimeoutException: Topic ... not present in metadata after 60000 ms)"}


def buffered_records(client: str, value_size: int, key_size: int = 0) -> int:
    """How many records the client's default buffer holds at most."""
    fit = BUFFER_MEMORY // (value_size + key_size + OVERHEAD)
    return min(fit, CONFLUENT_QUEUE) if client == "confluent-kafka" else fit


def records_for_steady_state(value_size, key_size=0, share=STEADY_SHARE, client="pyprod") -> int:
    """Records per run such that the client's buffer holds under ``share`` of them."""
    return int(buffered_records(client, value_size, key_size) / share) + 1
