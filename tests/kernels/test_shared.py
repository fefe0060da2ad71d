"""kcore/_<name>.py: the Python code both implementations run is compiled into the compiled modules,
so the compiled build's types and tracebacks name the module that ran (never kcore.pure), and
the twins still agree."""
import os
import subprocess
import sys
import traceback

import pytest

import kcore

TYPES = ("TopicPartition", "RecordMetadata", "BatchMetadata", "Future", "BatchFuture",
         "ReadyCheckResult", "FutureRecordMetadata", "ProduceRequestResult", "ProducerBatch",
         "RecordAccumulator", "TopicInfo", "BuiltInPartitioner", "SendPath", "BatchSendPath")


def _home(k, name):
    """The module an implementation's class or function says it comes from."""
    return getattr(k, name).__module__


def test_types_name_the_module_that_ran(k):
    tp = k.TopicPartition("t", 2)
    result = k.ProduceRequestResult(tp)
    future = k.FutureRecordMetadata(result, 3, 1000, 1, 5, -1)
    result.done(base_offset=40)
    md = future.get(timeout=1)
    assert md.offset == 43 and md.topic_partition == tp
    for name in TYPES:
        home = _home(k, name)
        if k.pure:
            assert home.startswith(("kcore.pure.", "kcore._")), (name, home)
        else:  # compiled in: e.g. kcore.future.RecordMetadata
            assert home.startswith("kcore.") and home.count(".") == 1 and \
                not home.startswith("kcore._"), (name, home)
    assert type(md).__module__ == ("kcore._future" if k.pure else "kcore.future")


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels only")
def test_compiled_build_imports_no_twin():
    """A producer's send() and send_batch() run without importing kcore.pure or a kcore/_<name>.py."""
    code = (
        "import sys\n"
        "from pyprod import KafkaProducer\n"
        "p = KafkaProducer(bootstrap_servers='127.0.0.1:1', api_version=(2, 8), max_block_ms=1)\n"
        "for call in (lambda: p.send('t', b'v', headers=[('k', 1)]),\n"
        "             lambda: p.send_batch('t', [b'v', 3]), lambda: p.send('t', b'v')):\n"
        "    try:\n"
        "        call()\n"
        "    except Exception:\n"
        "        pass\n"
        "p.close(timeout=0)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kcore.pure', 'kcore._'))))\n")
    env = dict(os.environ)
    env.pop("PYPROD_NO_EXTENSIONS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("call, compiled_frame", [
    (lambda p: p.send("t", b"v", headers=[("k", 1)]), "kcore.send_path._check_headers"),
    (lambda p: p.send_batch("t", [b"v", 3]), "kcore.batch_columns._binary_rows"),
], ids=["send", "send_batch"])
def test_tracebacks_name_the_module_that_ran(call, compiled_frame):
    """Bad input raises in the shared checks: compiled, the frame is the compiled module's."""
    from pyprod import KafkaProducer

    p = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 8), max_block_ms=1)
    try:
        with pytest.raises(TypeError) as e:
            call(p)
    finally:
        p.close(timeout=0)
    frames = [(f.filename, f.name) for f in traceback.extract_tb(e.value.__traceback__)]
    innermost = frames[-1]
    if kcore.EXTENSIONS:
        assert not any("/pure/" in f for f, _ in frames), frames
        assert innermost[1] == compiled_frame, frames
    else:
        assert "/kcore/_" in innermost[0].replace(os.sep, "/"), frames


@pytest.mark.parametrize("size", [61, 200, 70000])
def test_restamp_twins_agree(both, size):
    pure, compiled = both
    payload = bytes((i * 7 + 3) & 0xFF for i in range(size))
    a = pure.restamp(payload, 123456789012, 7, 4242)
    b = compiled.restamp(payload, 123456789012, 7, 4242)
    assert a == b and len(a) == size and a[21:43] == payload[21:43]
    assert int.from_bytes(a[43:51], "big") == 123456789012
    assert int.from_bytes(a[17:21], "big") == compiled.crc32c(a[21:])
    assert pure.restamp(payload, -1, -1, -1) == compiled.restamp(payload, -1, -1, -1)


def test_restamp_refuses_a_short_payload(k):
    with pytest.raises(ValueError, match="not a record batch"):
        k.restamp(b"x" * 60, 1, 0, 0)
