"""A producer-id reset never writes a record twice (real broker, through KafkaProxy).

The broker writes a batch, but its answer is lost with the connection, so the batch waits to be
retried. Before it is, another partition's batch fails for good (a record over the topic's
max.message.bytes), which leaves a sequence gap and so resets the producer id. The waiting batch
must first be retried under the old producer id, whose answer (DUPLICATE_SEQUENCE_NUMBER) says
it is written already; sent under the new id it would be stored twice.
"""
import random

from pyprod import KafkaProducer, errors
from pyprod.protocol import produce
from tests.harness.kafka_proxy import KafkaProxy
from tests.harness.readback import read_all_kafka_python

WAIT = 60


def test_lost_answer_then_reset_writes_once(kafka, topic):
    name = topic(2, configs={"max.message.bytes": 5000})
    with KafkaProxy(kafka.bootstrap_servers) as proxy, \
            KafkaProducer(bootstrap_servers=proxy.bootstrap_servers, linger_ms=0,
                          retry_backoff_ms=1500, reconnect_backoff_ms=20,
                          request_timeout_ms=10000) as p:
        warm = [p.send(name, b"warm-%d" % i, partition=i % 2) for i in range(10)]
        p.flush(WAIT)
        assert all(f.succeeded() for f in warm)
        resets = p._txn_partitions.resets

        proxy.lose_responses(produce.API_KEY)
        written = p.send(name, b"written-once", partition=0)
        assert proxy.lost.wait(WAIT)  # the broker has it; the producer does not know
        too_large = p.send(name, random.Random(1).randbytes(8000), partition=1)
        after = [p.send(name, b"after-%d" % i, partition=i % 2) for i in range(10)]
        p.flush(WAIT)

        assert isinstance(too_large.exception, errors.MessageSizeTooLargeError)
        assert p._txn_partitions.resets > resets  # the gap reset the producer id
        assert written.succeeded(), written.exception
        assert all(f.succeeded() for f in after)
    read = read_all_kafka_python(kafka.bootstrap_servers, name, 21)
    values = [r.value for r in read]
    assert values.count(b"written-once") == 1, values
    assert sorted(values) == sorted([b"warm-%d" % i for i in range(10)] + [b"written-once"] +
                                    [b"after-%d" % i for i in range(10)])
    p0 = [r.value for r in sorted(read, key=lambda r: r.offset) if r.partition == 0]
    assert p0.index(b"written-once") < p0.index(b"after-0")
