"""send_batch: records encoded into the accumulator's batches per second, no network.

A RecordAccumulator with metadata for one 6-partition topic (leader known), 512 MB of buffer
memory and the default 16 KiB batches. Between rounds (untimed) every batch is taken out and
completed, so its memory goes back to the BufferPool and the next round writes into recycled
slabs, as in a producer whose Sender keeps up (fresh memory would measure page faults).
Rows: KafkaProducer.send_batch's path (kcore.BatchSendPath) on pyarrow arrays and on Python
lists (distinct values, 16-byte keys), against send() in a loop (kcore.SendPath.send, which is
KafkaProducer.send; a fifth of the records) and kafka-python's RecordAccumulator.append in a
loop (the last step of its send(), after its serializer and partitioner, so its send() costs
more; a fiftieth of the records). records/s (and value bytes/s) in extra_info; the ratios
are printed at the end.

    python -m pytest bench/bench_send_batch.py --benchmark-enable
"""
import random

import pyarrow as pa
import pytest

import kcore
from _report import write_report  # bench/ is on sys.path for its modules
from pyprod import config
from pyprod.cluster import Broker, Cluster, PartitionInfo
from pyprod.producer import accumulator_settings, send_settings

PARTS = 6
TS = 1_700_000_000_000
_rng = random.Random(7)
_results = {}


class _Metadata:
    version = 1

    def __init__(self):
        parts = {i: PartitionInfo("t", i, 0, 0, [0], [0], []) for i in range(PARTS)}
        self.cluster = Cluster({0: Broker(0, "127.0.0.1", 9092, None)}, {"t": parts})


def _data(n, size, keyed):
    """n distinct values (hex text, so about as compressible as text) and 16-byte keys."""
    blob = _rng.randbytes(n * size // 2 + 1).hex().encode()
    values = [blob[i * size:(i + 1) * size] for i in range(n)]
    keys = [b"user-%011d" % _rng.randrange(10_000) for _ in range(n)] if keyed else None
    return values, keys


WORKLOADS = {  # name: (records per round, value bytes, keyed)
    "100B keyless": (500_000, 100, False),
    "100B keyed": (500_000, 100, True),
    "1KiB keyless": (100_000, 1024, False),
}
_DATA = {}


def _workload(name):
    if name not in _DATA:
        n, size, keyed = WORKLOADS[name]
        values, keys = _data(n, size, keyed)
        _DATA[name] = dict(values=values, keys=keys,
                           arrow_values=pa.array(values, pa.binary()),
                           arrow_keys=pa.array(keys, pa.binary()) if keyed else None)
    return _DATA[name]


def _paths(pure=False):
    k = kcore.kernels(pure=pure)
    cfg = config.build(buffer_memory=512 << 20)
    acc = k.RecordAccumulator(_Metadata(), seed=1, **accumulator_settings(cfg))
    settings = send_settings(cfg)
    sp = k.SendPath(acc, lambda *a: None, lambda: None, **settings)
    return acc, sp, k.BatchSendPath(sp, acc, lambda *a: None, lambda: None, **settings)


def _recycle(acc):
    """Take every batch out and complete it: the memory goes back to the pool."""
    for batch in acc.expired_batches(1 << 62):
        acc.complete(batch, base_offset=0)


def _send_batch_arrow(d, paths):
    bp = paths[2]
    return lambda: bp.send("t", d["arrow_values"], keys=d["arrow_keys"])


def _send_batch_lists(d, paths):
    bp = paths[2]
    return lambda: bp.send("t", d["values"], keys=d["keys"])


def _send_loop(d, paths):
    send, values, keys = paths[1].send, d["values"], d["keys"]

    def run():
        if keys is None:
            for v in values:
                send("t", v)
        else:
            for v, key in zip(values, keys):
                send("t", v, key)
    return run


def _kafka_python_append(d, paths):
    from kafka.partitioner.default import murmur2
    from kafka.producer.record_accumulator import RecordAccumulator
    from kafka.structs import TopicPartition
    acc = RecordAccumulator(batch_size=16384)
    append, values, keys = acc.append, d["values"], d["keys"]
    tps = [TopicPartition("t", i) for i in range(PARTS)]

    def run():
        if keys is None:  # its sticky partitioner moves on per batch: rotate as often
            for i, v in enumerate(values):
                append(tps[(i >> 7) % PARTS], TS, None, v, [])
        else:
            for v, key in zip(values, keys):
                append(tps[(murmur2(key) & 0x7fffffff) % PARTS], TS, key, v, [])
    return run


IMPLS = {
    "send_batch arrow": _send_batch_arrow,
    "send_batch lists": _send_batch_lists,
    "send() loop": _send_loop,
    "kafka-python append loop": _kafka_python_append,
}
SHARE = {"send() loop": 5, "kafka-python append loop": 50}  # run a fraction of the records


@pytest.fixture(scope="module", autouse=True)
def ratio_report(request):
    yield
    lines = []
    for name, (_, size, _) in WORKLOADS.items():
        base = _results.get((name, "send_batch arrow"))
        if not base:
            continue
        lines.append("send_batch, %s values: best records/s (value MB/s), send_batch "
                     "arrow / row" % name)
        for impl in IMPLS:
            rate = _results.get((name, impl))
            if rate:
                lines.append("  %-26s %12.0f  %8.0f MB/s   %.2fx"
                             % (impl, rate, rate * size / 1e6, base / rate))
    write_report(request, lines)


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_send_batch(benchmark, workload, impl):
    if not kcore.EXTENSIONS:
        pytest.skip("compiled kernels disabled")
    d = _workload(workload)
    share = SHARE.get(impl, 1)
    if share > 1:
        d = dict(d, values=d["values"][:len(d["values"]) // share],
                 keys=d["keys"][:len(d["keys"]) // share] if d["keys"] else None)
    n = len(d["values"])
    paths = _paths()
    run = IMPLS[impl](d, paths)

    def setup():
        _recycle(paths[0])
        return (), {}

    benchmark.group = "send_batch " + workload
    benchmark.pedantic(run, setup=setup, rounds=5, warmup_rounds=1)
    if benchmark.stats is not None:  # None under --benchmark-disable
        rate = n / benchmark.stats.stats.min
        benchmark.extra_info["records/s"] = round(rate)
        benchmark.extra_info["value bytes/s"] = round(rate * WORKLOADS[workload][1])
        _results[(workload, impl)] = rate
