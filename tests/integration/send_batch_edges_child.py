"""One send_batch edge case of test_send_batch_edges.py, run in a child process: the producer
uses the kernels the environment selects at import (PYPROD_NO_EXTENSIONS=1: the pure twins),
and a crash (the compiled walk reading past a column) is the parent's to report.

    python send_batch_edges_child.py CASE VARIANT BOOTSTRAP TOPIC

prints one JSON line: which kernels ran, what the call raised or how its future ended, and the
pool's free memory once every batch completed. The parent reads the topic back itself; the
columns come from the functions below, which it imports too.
"""
import json
import sys
import time

MAX_REQUEST = 10_000      # too_large: max_request_size
N_TOO_LARGE, BIG_AT = 3000, 1500
N_NONES = 1_000_000
N_SERIALIZED, RAISE_AT = 1000, 500   # the serializer raises on its 500th item
N_SHRUNK = 5000
MARKER = b"marker"


class Boom(Exception):
    """What the test's serializer raises."""


class LyingLength:
    """A sequence whose __len__ claims `claimed` items while it holds (and iterates) `items`."""

    def __init__(self, items, claimed):
        self.items, self.claimed = list(items), claimed

    def __len__(self):
        return self.claimed

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)


# -- the columns (the parent rebuilds them to check the read-back) -----------------------------
def too_large_rows():
    """Keys (every third record keyed) and values with their index up front; one value, in the
    middle, twice max_request_size."""
    keys = [b"k%d" % (i % 7) if i % 3 == 0 else None for i in range(N_TOO_LARGE)]
    values = [b"%05d:" % i + bytes([97 + i % 26]) * (i % 300) for i in range(N_TOO_LARGE)]
    values[BIG_AT] = b"%05d:" % BIG_AT + b"X" * (2 * MAX_REQUEST)
    return keys, values


def none_keys(keyed):
    return [b"%d" % i for i in range(N_NONES)] if keyed else None


def serialized_values():
    return ["v%04d" % i for i in range(N_SERIALIZED)]


def shrunk_rows():
    values = [b"%04d" % i for i in range(N_SHRUNK)]
    keys = [b"k%d" % i for i in range(N_SHRUNK)]
    parts = [i % 3 for i in range(N_SHRUNK)]
    return values, keys, parts, [1_700_000_000_000 + i for i in range(N_SHRUNK)]


# -- the cases: (producer configs, body(producer, topic, out) -> the call's futures) ---------
def _arrow(values, typ="binary"):
    import pyarrow as pa
    return pa.array(values, getattr(pa, typ)())


def case_too_large(variant):
    keys, values = too_large_rows()
    if variant == "arrow":
        keys, values = _arrow(keys), _arrow(values, "large_binary")
    return dict(max_request_size=MAX_REQUEST, linger_ms=5), \
        lambda p, t, out: p.send_batch(t, values, keys=keys)


def case_empty(variant):
    values = [] if variant == "list" else _arrow([])
    keys = [] if variant == "list" else _arrow([], "string")
    return {}, lambda p, t, out: (p.send_batch(t, values), p.send_batch(t, values, keys=keys))


def case_nones(variant):
    keys = none_keys(variant == "keyed")
    return dict(linger_ms=5), lambda p, t, out: p.send_batch(t, [None] * N_NONES, keys=keys)


def case_serializer_raises(variant):
    """The first call's serializer raises on its RAISE_AT-th item; the second sends the column."""
    calls = [0]

    def serialize(item):
        calls[0] += 1
        if calls[0] == RAISE_AT:
            raise Boom("serializer refused item #%d" % (RAISE_AT - 1))
        return item.encode() if isinstance(item, str) else item  # (the marker: bytes, None)

    def body(p, t, out):
        values = serialized_values()
        keys = values if variant == "key" else None
        try:
            p.send_batch(t, values, keys=keys)
        except Exception as e:  # noqa: BLE001 - reported by type
            out["first_raised"] = [type(e).__name__, str(e)[:500]]
        calls[0] = -10**9  # never again
        return p.send_batch(t, values, keys=keys)
    cfg = {"key_serializer" if variant == "key" else "value_serializer": serialize}
    return dict(cfg, linger_ms=5), body


def case_bad_length(variant):
    """Columns of unequal length, told or found only while the call runs."""
    values, keys, parts, stamps = shrunk_rows()
    columns = dict(values=values)
    cfg = {}
    if variant == "keys_shorter":
        columns["keys"] = keys[:-1]
    elif variant == "lying_values":
        columns["values"] = LyingLength(values[:1], N_SHRUNK)
    elif variant == "lying_keys":
        columns["keys"] = LyingLength(keys[:1], N_SHRUNK)
    else:  # shrunk_<column>: the value serializer empties that column past its first item
        name = variant[len("shrunk_"):]
        columns.update(keys=keys, partitions=parts, timestamps=stamps)
        victim = columns[name]

        def shrink(item):
            del victim[1:]
            return item
        cfg["value_serializer"] = shrink
    return cfg, lambda p, t, out: p.send_batch(t, **columns)


CASES = {"too_large": case_too_large, "empty": case_empty, "nones": case_nones,
         "serializer_raises": case_serializer_raises, "bad_length": case_bad_length}


# -- the run ---------------------------------------------------------------------------------
def _outcome(future):
    """How a BatchFuture ended, as JSON."""
    from pyprod import errors
    try:
        md = future.get(timeout=120)
    except errors.BatchDeliveryError as e:
        return {"failures": [[i, type(x).__name__] for i, x in e.failures],
                "failed_count": e.failed_count, "succeeded_count": e.succeeded_count}
    return {"record_count": md.record_count,
            "partition_counts": {str(k): v for k, v in md.partition_counts.items()}}


def _free_memory(p, total):
    """The pool's free bytes once it has them all back (the Sender gives a batch's memory back
    just after completing it), or what it has after 10 s."""
    pool = p._accumulator.pool
    for _ in range(1000):
        if pool.available_memory == total:
            break
        time.sleep(0.01)
    return pool.available_memory


def run(case, variant, bootstrap, topic):
    import kcore
    from pyprod import KafkaProducer
    cfg, body = CASES[case](variant)
    out = {"pure": not kcore.EXTENSIONS}
    with KafkaProducer(bootstrap_servers=bootstrap, **cfg) as p:
        out["accumulator"] = type(p._accumulator).__module__
        try:
            result = body(p, topic, out)
        except Exception as e:  # noqa: BLE001 - reported to the parent by type
            out["raised"] = [type(e).__name__, str(e)[:500]]
        else:
            futures = result if isinstance(result, tuple) else (result,)
            out["done_at_once"] = [f.is_done for f in futures]
            out["outcomes"] = [_outcome(f) for f in futures]
        p.send(topic, MARKER, partition=0).get(60)  # the producer still works
        p.flush(timeout=120)
        out["buffer_memory"] = p.config["buffer_memory"]
        out["free_memory"] = _free_memory(p, p.config["buffer_memory"])
        out["incomplete"] = p._accumulator.has_incomplete()
    return out


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:5])), flush=True)
