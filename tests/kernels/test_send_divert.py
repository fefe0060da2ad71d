"""SendPath.divert (pyprod.otel's hook) on both implementations: send() calls the divert's
function only while the context variable's value holds the key, send_direct() never does,
and the accumulator's topics follow the metadata's update listener."""
import contextvars
import threading

from test_batch_split import _decoded
from test_record_accumulator import FakeMetadata, _drain_all, _path

KEY = "current-span"


def test_divert_only_while_the_key_is_set(k):
    acc, sp, _ = _path(k)
    var = contextvars.ContextVar("ctx")  # no default: unset is no divert
    calls = []

    def diverted(*args):
        calls.append(args)
        return sp.send_direct(*args)

    sp.divert(var, KEY, diverted)
    sp.send("t", b"unset", partition=0)
    var.set({})
    sp.send("t", b"empty", partition=0)
    var.set({"baggage": 1})
    sp.send("t", b"other", partition=0)
    token = var.set({"baggage": 1, KEY: object()})
    sp.send("t", b"set", b"k", [("h", b"v")], 1, 1_700_000_000_000)
    sp.send_direct("t", b"direct", partition=0)
    assert calls == [("t", b"set", b"k", [("h", b"v")], 1, 1_700_000_000_000)]
    var.reset(token)
    sp.send("t", b"after", partition=0)
    sp.divert()  # no divert at all
    var.set({KEY: 1})
    sp.send("t", b"cleared", partition=0)
    assert len(calls) == 1
    values = sorted(r[2] for b in _drain_all(acc) for r in _decoded(b))
    assert values == sorted([b"unset", b"empty", b"other", b"set", b"direct", b"after",
                             b"cleared"])


def test_divert_follows_each_threads_context(k):
    """A context variable is per thread: only the thread whose context holds the key diverts."""
    _, sp, _ = _path(k)
    var = contextvars.ContextVar("ctx", default={})
    seen = []
    sp.divert(var, KEY, lambda *a: seen.append(threading.current_thread().name))

    def run(traced):
        if traced:
            var.set({KEY: 1})
        for _ in range(100):
            sp.send("t", b"v", partition=0)

    threads = [threading.Thread(target=run, args=(i % 2 == 0,), name="t%d" % i)
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(set(seen)) == ["t0", "t2"] and len(seen) == 200


def test_topics_follow_the_update_listener(k):
    """A topic that grows in a metadata update is read again at its next record."""
    meta = FakeMetadata(2)
    acc, sp, _ = _path(k, metadata=meta)
    assert acc.topic_info("t").num_partitions == 2
    grown = FakeMetadata(8)
    meta.cluster = grown.cluster
    meta.version += 1  # what Metadata.update does: the listener is told
    sp.send("t", b"v", partition=7)
    assert acc.topic_info("t").num_partitions == 8

