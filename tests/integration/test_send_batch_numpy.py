"""KafkaProducer.send_batch with numpy and pandas columns against a real Kafka broker, read back
by confluent-kafka and kafka-python: counts, per-partition order, keys, values (numpy's S
semantics: trailing NULs dropped) and timestamps byte-exact."""
import random

import numpy as np
import pandas as pd
import pytest

from pyprod import KafkaProducer
from tests.harness.readback import Sent, compare, read_all_confluent, read_all_kafka_python

N = 4000


def _rows(seed):
    rng = random.Random(seed)
    values = [rng.randbytes(rng.choice([0, 1, 30, 100])).rstrip(b"\x00") + b"\x00" * (i % 3)
              for i in range(N)]
    keys = ["k\u00e9-%d-\U0001F600" % rng.randrange(50) if i % 7 else "" for i in range(N)]
    parts = [rng.randrange(4) for _ in range(N)]
    stamps = [1_600_000_000_000 + rng.randrange(10**9) for _ in range(N)]
    return values, keys, parts, stamps


@pytest.mark.parametrize("form", ["numpy", "pandas"])
def test_numpy_and_pandas_round_trip(kafka, topic, form):
    name = topic(4)
    values, keys, parts, stamps = _rows(seed=7)
    v = np.array(values, "S100")
    k = np.array(keys, "U20")
    p = np.array(parts, "u2")
    t = (np.array(stamps, "int64") * 1000).astype("datetime64[us]")
    if form == "pandas":
        v, k = pd.Series(v), pd.Series(k, dtype="string[pyarrow]")
        p = pd.Series(p, dtype="Int64")
        t = pd.Series(t).dt.tz_localize("UTC")
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=5) as prod:
        md = prod.send_batch(name, v, keys=k, partitions=p, timestamps=t).get(60)
    assert md.record_count == N
    assert md.partition_counts == {q: parts.count(q) for q in range(4)}
    sent = [Sent(kk.encode(), vv.rstrip(b"\x00"), [], ts, q)
            for vv, kk, q, ts in zip(values, keys, parts, stamps)]
    read = read_all_confluent(kafka.bootstrap_servers, name, expected_count=N)
    compare(sent, read)  # per partition, in send order
    compare(sent, read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=N))
