"""MESSAGE_TOO_LARGE from a real broker (a topic with a small max.message.bytes): the batch is
split in halves and retried, as the Java client does, so only a record too large on its own
fails. kafka-python reads back what was acknowledged: each record once, in order, at the
offset its future gave."""
import random

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_kafka_python

WAIT = 120
LIMIT = 3000  # the topic's max.message.bytes


def _send(producer, name, n, big=()):
    futures = []
    for i in range(n):
        value = random.Random(i).randbytes(LIMIT + 500) if i in big else b"%06d-" % i + b"x" * (40 + i % 90)
        futures.append(producer.send(name, value, key=b"k%d" % (i % 5),
                                     headers=[("i", b"%d" % i)]))
    producer.flush(timeout=WAIT)
    return futures


@pytest.mark.parametrize("idempotent,compression", [(True, None), (False, None),
                                                    (True, "lz4"), (False, "gzip")])
def test_oversized_batches_are_split_not_failed(kafka, topic, idempotent, compression):
    name = topic(2, configs={"max.message.bytes": LIMIT})
    n, big = 3000, {777, 2222}
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=50,
                       batch_size=256 * 1024, enable_idempotence=idempotent,
                       compression_type=compression,  # without idempotence, order needs 1
                       max_in_flight_requests_per_connection=5 if idempotent else 1) as p:
        futures = _send(p, name, n, big)
        assert p.metrics()["producer-metrics"].get("batch-split-total", 0) > 0
    for i, f in enumerate(futures):
        assert f.is_done
        if i in big:
            assert isinstance(f.exception, errors.MessageSizeTooLargeError), f.exception
        else:
            assert f.exception is None, (i, f.exception)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, n - len(big))
    got = {(r.partition, r.offset): r for r in read}
    assert len(read) == n - len(big)
    for i, f in enumerate(futures):
        if i not in big:
            md = f.get(0)
            r = got[(md.partition, md.offset)]
            assert (r.key, r.headers) == (b"k%d" % (i % 5), [("i", b"%d" % i)])
            assert r.value.startswith(b"%06d-" % i)
    for part in {r.partition for r in read}:
        seq = [int(r.value[:6]) for r in sorted(read, key=lambda r: r.offset)
               if r.partition == part]
        assert seq == sorted(seq)  # per partition, in send order
