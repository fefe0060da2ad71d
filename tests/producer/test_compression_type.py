"""kcore.compression_type, the one codec registry: config, aio, perf, both builders and the split
path read it; cramjam is imported only when a codec is used (a producer without compression on
free-threaded 3.13 must not import it: its only cramjam turns the GIL on)."""
import json
import subprocess
import sys

import pytest

from kcore import compression_type
from kcore.errors import UnsupportedCodecError
from kcore._producer_batch import batch_records
from pyprod import config, perf
from pyprod.aio import config as aio_config
from tests.harness.readback import read_all_kafka_python

HEADER = 61
RECORDS = [(1_700_000_000_000 + i, None if i % 3 else b"k%d" % i, b"value-%d " % i * (i * 97 % 700),
            [("h", b"%d" % i)] if i % 4 == 0 else []) for i in range(400)]  # ~130 KiB


def test_the_ids_are_kafkas():
    """Names and attributes ids as Kafka's protocol has them, each found by name and by id."""
    assert [(t.name, t.id) for t in compression_type.TYPES] == [
        ("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)]
    for t in compression_type.TYPES:
        assert compression_type.for_name(t.name) is compression_type.for_id(t.id) is t
        assert t.available
    assert compression_type.for_name(None) is compression_type.NONE
    for bad in ("brotli", "GZIP", 1, b"gzip"):
        with pytest.raises(UnsupportedCodecError, match="expected one of none, gzip, snappy"):
            compression_type.for_name(bad)
    with pytest.raises(UnsupportedCodecError):
        compression_type.for_id(5)


def test_config_aio_and_perf_accept_the_registry_names():
    """Every place that validates compression_type takes exactly the registry's names."""
    assert config.CODECS == compression_type.CODECS
    for name in compression_type.CODECS:
        assert config.build(compression_type=name)["compression_type"] == name
    assert config.build(compression_type="none")["compression_type"] is None
    with pytest.raises(config.KafkaConfigurationError, match="Not supported codec: 'brotli'"):
        config.build(compression_type="brotli")
    for name in compression_type.CODECS + (None,):
        aio_config.check(dict(aio_config.DEFAULTS, compression_type=name))
    for bad in ("none", "brotli"):
        with pytest.raises(ValueError, match="Invalid compression type!"):
            aio_config.check(dict(aio_config.DEFAULTS, compression_type=bad))
    (action,) = [a for a in perf.build_parser()._actions if a.dest == "compression_type"]
    assert tuple(action.choices) == compression_type.NAMES


@pytest.mark.parametrize("name", compression_type.NAMES)
def test_builders_and_split_path_agree(both, name):
    """Both builders write the same bytes for each codec, with the registry's id and its
    compress; the split path reads them back through the registry's decompress."""
    codec = compression_type.for_name(name)
    batches = []
    for k in both:
        b = k.RecordBatchBuilder(1 << 24, compression=name)
        assert all(b.append(*r) for r in RECORDS)
        batches.append(b.build())
    assert batches[0] == batches[1]
    batch = batches[0]
    assert int.from_bytes(batch[21:23], "big") & 7 == codec.id
    raw = both[0].RecordBatchBuilder(1 << 24)
    assert all(raw.append(*r) for r in RECORDS)
    records = raw.build()[HEADER:]
    assert bytes(codec.compress(records)) == batch[HEADER:]
    assert codec.decompress(batch[HEADER:]) == records
    assert batch_records(batch) == RECORDS


_PRODUCE = """
import json, sys
from pyprod import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], compression_type=sys.argv[3] or None)
p.send(sys.argv[2], b"v-" + sys.argv[3].encode()).get(timeout=60)
p.close()
print(json.dumps("cramjam" in sys.modules))
"""


@pytest.mark.parametrize("name", ["", "none", "gzip"])
def test_cramjam_imported_only_for_a_codec(kafka, topic, name):
    """A producer without compression sends without importing cramjam (checked in a fresh
    interpreter, both twins); with a codec it does. kafka-python reads the records back."""
    t = topic(1)
    out = subprocess.run([sys.executable, "-c", _PRODUCE, kafka.bootstrap_servers, t, name],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) is (name == "gzip")
    read = read_all_kafka_python(kafka.bootstrap_servers, t, expected_count=1)
    assert [r.value for r in read] == [b"v-" + name.encode()]
