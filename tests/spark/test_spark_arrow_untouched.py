"""The Arrow path of the Spark sink (format("pyprod")'s Arrow writer and pyprod.spark.publish's
mapInArrow task, both through pyprod.spark.writer.write_arrow; exactly-once through
pyprod.spark.transactions.write) hands send_batch Spark's Arrow columns as they are: pyarrow
arrays over the batches' own buffers, never lists or pandas. Spark itself is not needed: the
task functions run on a spy producer."""
import pyarrow as pa

from pyprod.spark import transactions, writer
from pyprod.spark.columns import Columns

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class SpyProducer:
    def __init__(self):
        self.calls = []

    def send_batch(self, topic, **kwargs):
        self.calls.append((topic, kwargs))
        return Done()

    def flush(self):
        pass

    def init_transactions(self):
        pass

    def begin_transaction(self):
        pass

    def prepare_transaction(self):
        return "prepared"

    def close(self, timeout=None):
        pass


class Done:
    is_done = True

    def failed(self):
        return False

    def get(self):
        return None


class SpyCache:
    def __init__(self, producer):
        self.producer = producer

    def acquire(self, config):
        return self.producer

    def release(self, producer, discard=False):
        pass


def _batches():
    out = []
    for k in range(3):
        out.append(pa.record_batch(
            [pa.array([b"v%d" % i for i in range(k, k + 4)]), pa.array(["k"] * 4),
             pa.array([0, 1, None, 2], pa.int32()),
             pa.array([[{"key": "h", "value": b"x"}]] * 4, HEADERS),
             pa.array([1_700_000_000_000_000] * 4, pa.timestamp("us"))],
            names=["value", "key", "partition", "headers", "timestamp"]))
    return out


COLUMNS = Columns(value=0, key=1, partition=2, headers=3, timestamp=4)
SENT = {"values": 0, "keys": 1, "partitions": 2, "headers": 3, "timestamps": 4}


def _check(calls, batches):
    assert len(calls) == 1  # the task's batches grouped into one call
    topic, kwargs = calls[0]
    assert topic == "t" and set(kwargs) == set(SENT)
    for name, i in SENT.items():
        col = kwargs[name]
        assert isinstance(col, (pa.Array, pa.ChunkedArray)), (name, type(col))
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        assert len(chunks) == len(batches)
        for chunk, batch in zip(chunks, batches):  # the batches' own buffers: no copy
            src = batch.column(i)
            assert [b.address if b is not None else None for b in chunk.buffers()] == \
                [b.address if b is not None else None for b in src.buffers()], name


def test_the_arrow_writer_passes_the_batches_columns_untouched():
    spy = SpyProducer()
    settings = writer.SinkSettings("t", {}, COLUMNS)
    batches = _batches()
    assert writer.write_arrow(settings, iter(batches), cache=SpyCache(spy)) == 12
    _check(spy.calls, batches)


def test_the_exactly_once_writer_too():
    spy = SpyProducer()
    settings = writer.SinkSettings("t", {}, COLUMNS)
    batches = _batches()
    count, prepared = transactions.write(settings, writer.arrow_sends(settings, iter(batches)),
                                         "tid", factory=lambda config: spy)
    assert (count, prepared) == (12, "prepared")
    _check(spy.calls, batches)
