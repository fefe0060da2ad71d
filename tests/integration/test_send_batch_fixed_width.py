"""send_batch from numpy S columns read in place (#44) against a real Kafka broker: small
batches, so the GIL-free walk stops and resumes mid-column at many batch boundaries (and grows
batches to batch_max_size at once), read back by confluent-kafka and kafka-python: values and
keys with numpy's S semantics (trailing NULs dropped, inner ones kept), in order per partition."""
import random

import numpy as np

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

N = 6000


def test_numpy_s_columns_across_batch_boundaries(kafka, topic):
    name = topic(3)
    rng = random.Random(44)
    values = [rng.randbytes(rng.choice([0, 1, 99, 100])) for _ in range(N)]
    values = [v[:-2] + b"\x00\x00" if i % 9 == 0 and len(v) > 2 else v
              for i, v in enumerate(values)]
    keys = [b"k\x00%d" % (i % 13) if i % 4 else b"" for i in range(N)]
    parts = [rng.randrange(3) for _ in range(N)]
    stamps = [1_700_000_000_000 + i for i in range(N)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5,
                       batch_size=2048, batch_max_size=8192) as prod:
        md = prod.send_batch(name, np.array(values, "S100"), keys=np.array(keys, "S5"),
                             partitions=np.array(parts, "u1"),
                             timestamps=np.array(stamps, "int64")).get(60)
    assert md.record_count == N
    sent = [Sent(k, v.rstrip(b"\x00"), [], ts, p)
            for v, k, p, ts in zip(values, keys, parts, stamps)]
    compare(sent, read_all_confluent(kafka.bootstrap_servers, name, expected_count=N))
    compare(sent, read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=N))
