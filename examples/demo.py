"""The main job: publish through pyprod to a local Apache Kafka broker, then check every record.

    python examples/demo.py [--records 1000000] [--value-size 100] [--partitions 6]

Starts a 1-node Kafka broker (pyprod.local_broker.LocalBroker; Java 17+ and Maven needed, jars
fetched once) unless --bootstrap-servers is given, creates a topic, sends the records from one
thread through pyprod.KafkaProducer, prints records/s and MB/s (first send() until flush()
returns), then reads the topic back with a client this project did not write (confluent-kafka
or kafka-python, through the tests' read-back, tests/harness/readback.py, so run it from a
checkout) and checks count, keys, values, per-partition order and the partition of every keyed
record (Java's murmur2, as computed by kafka-python). Exit status 0 when every record is there
exactly once and in order, 1 otherwise.

Record ``seq`` has a value starting with ``seq`` (8 bytes, big endian) followed by a
pattern that depends on ``seq``; every ``--key-every``-th record has the key ``key-<n>``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.harness

import kcore  # noqa: E402
import pyprod  # noqa: E402
from pyprod import KafkaProducer  # noqa: E402
from pyprod.local_broker import LocalBroker  # noqa: E402
from tests.harness import readback  # noqa: E402

SEQ = 8  # bytes of sequence number at the start of each value
N_KEYS = 1000
WARMUP = b"warm"  # one per partition before the clock starts (shorter than SEQ: not a record)


class Records:
    """Deterministic records: value/key of ``seq`` can be rebuilt when checking."""

    def __init__(self, value_size: int, key_every: int):
        self.value_size = value_size
        self.key_every = key_every
        self.block = bytes(range(256)) * (max(value_size, 256) // 256 + 2)

    def value(self, seq: int) -> bytes:
        tail = self.value_size - SEQ
        off = (seq * 31) % 256
        return seq.to_bytes(SEQ, "big") + self.block[off:off + tail]

    def key(self, seq: int) -> bytes | None:
        if self.key_every and seq % self.key_every == 0:
            return b"key-%d" % ((seq // self.key_every) % N_KEYS)
        return None


def publish(bootstrap: str, topic: str, n: int, recs: Records, producer_config: dict) -> dict:
    values = [recs.value(i) for i in range(n)]
    keys = [recs.key(i) for i in range(n)]
    key_bytes = sum(len(k) for k in keys if k is not None)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **producer_config)
    failures = []
    try:
        # Before the clock starts: metadata, connections, and one record per partition, so
        # that a new topic's leaders answer (right after creation a broker may still reply
        # NOT_LEADER_OR_FOLLOWER for a moment, and a retried batch could land after later ones
        # when idempotence is off).
        parts = sorted(producer.partitions_for(topic))
        for f in [producer.send(topic, WARMUP, partition=p) for p in parts]:
            f.get(60)
        send = producer.send
        probes = []
        t0 = time.perf_counter()
        for i in range(n):
            f = send(topic, values[i], keys[i])
            if i % 10_000 == 0:
                probes.append(f)
        producer.flush()
        wall = time.perf_counter() - t0
        failures = [f.exception for f in probes if f.failed()]
    finally:
        producer.close()
    if failures:
        raise RuntimeError(f"{len(failures)} sampled sends failed, first: {failures[0]!r}")
    size = n * recs.value_size + key_bytes
    return {"wall_s": wall, "records_per_s": n / wall, "mb_per_s": size / wall / 1e6,
            "bytes": size}


def verify(records, n: int, recs: Records, partitions: int, max_report: int = 10) -> list[str]:
    """Problems found in ``records`` (readback.Record, sorted by partition, offset), which
    hold ``n`` records and one WARMUP record at the start of each partition."""
    from kafka.partitioner.default import murmur2  # kafka-python's, not ours

    problems: list[str] = []

    def bad(msg):
        if len(problems) < max_report:
            problems.append(msg)

    warm = [r for r in records if r.value == WARMUP and r.key is None]
    if sorted(r.partition for r in warm) != list(range(partitions)):
        bad(f"warm-up records: expected one in each of {partitions} partitions, read "
            f"{len(warm)} in {sorted(r.partition for r in warm)}")
    if len(records) - len(warm) != n:
        bad(f"count: sent {n:,} records, read {len(records) - len(warm):,}")
    seen = bytearray(n)
    key_partition: dict = {}
    last_seq: dict = {}
    for r in records:
        if r.value == WARMUP and r.key is None:
            if r.partition in last_seq:
                bad(f"partition {r.partition}: warm-up record after data records")
            continue
        where = f"partition {r.partition} offset {r.offset}"
        v = r.value or b""
        seq = int.from_bytes(v[:SEQ], "big") if len(v) >= SEQ else -1
        if not 0 <= seq < n:
            bad(f"{where}: value does not carry a sequence number below {n}: {v[:16]!r}")
            continue
        if seen[seq]:
            bad(f"{where}: record #{seq} read twice (duplicate)")
        seen[seq] = 1
        if v != recs.value(seq):
            bad(f"{where}: value of record #{seq} differs from what was sent")
        want_key = recs.key(seq)
        if r.key != want_key:
            bad(f"{where}: record #{seq} key {r.key!r}, sent {want_key!r}")
        elif want_key is not None:
            p = key_partition.get(want_key)
            if p is None:
                p = key_partition[want_key] = (murmur2(want_key) & 0x7FFFFFFF) % partitions
            if r.partition != p:
                bad(f"{where}: key {want_key!r} should be in partition {p} (Java's murmur2)")
        prev = last_seq.get(r.partition, -1)
        if seq <= prev:
            bad(f"{where}: record #{seq} after #{prev}: per-partition order broken")
        last_seq[r.partition] = seq
    missing = n - sum(seen)
    if missing:
        first = seen.index(0)
        bad(f"{missing:,} records missing (first: #{first})")
    return problems


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="python examples/demo.py",
        description="Publish through pyprod to a local Kafka broker, print the throughput, "
                    "read everything back with an independent client and check it.")
    ap.add_argument("--records", type=int, default=1_000_000, help="default 1,000,000")
    ap.add_argument("--value-size", type=int, default=100, help="bytes, >= 8 (default 100)")
    ap.add_argument("--key-every", type=int, default=4,
                    help="every Nth record is keyed, 0 = none (default 4)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--acks", default="all", choices=["0", "1", "all"],
                    help="default all (with idempotence, the producer's default)")
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--compression-type", default=None,
                    choices=["gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--reader", default="confluent", choices=["confluent", "kafka-python"],
                    help="independent client used to read back (default confluent)")
    ap.add_argument("--bootstrap-servers", help="use this broker instead of starting one")
    args = ap.parse_args(argv)
    if args.records <= 0:
        ap.error("--records must be positive")
    if args.value_size < SEQ:
        ap.error(f"--value-size must be at least {SEQ}")
    if args.key_every < 0 or args.partitions <= 0:
        ap.error("--key-every must be >= 0 and --partitions positive")
    if args.acks == "0":
        ap.error("--acks 0 gives no acknowledgement to time or check against; use 1 or all")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    n = args.records
    recs = Records(args.value_size, args.key_every)
    config = {"acks": "all" if args.acks == "all" else int(args.acks),
              "linger_ms": args.linger_ms, "compression_type": args.compression_type}
    kernels = "compiled" if kcore.EXTENSIONS else "pure-Python (PYPROD_NO_EXTENSIONS=1)"
    print(f"pyprod {pyprod.__version__} ({kernels} kernels), Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores", flush=True)

    cluster = None
    try:
        if args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
        else:
            print("starting a local 1-node Apache Kafka broker ...", flush=True)
            cluster = LocalBroker().start()
            bootstrap = cluster.bootstrap_servers
            print(f"Kafka {cluster.version} on {bootstrap} (up in "
                  f"{cluster.startup_seconds:.1f}s)", flush=True)
        topic = f"pyprod-demo-{uuid.uuid4().hex[:8]}"
        if cluster is not None:
            cluster.create_topic(topic, args.partitions)
        else:
            _create_topic(bootstrap, topic, args.partitions)

        keyed = f"every {args.key_every}th keyed" if args.key_every else "keyless"
        print(f"publishing {n:,} records ({args.value_size}-byte values, {keyed}) to {topic} "
              f"({args.partitions} partitions), acks={args.acks}, linger_ms={args.linger_ms}, "
              f"compression={args.compression_type} ...", flush=True)
        res = publish(bootstrap, topic, n, recs, config)
        print(f"published {n:,} records in {res['wall_s']:.2f}s: {res['records_per_s']:,.0f} "
              f"records/s, {res['mb_per_s']:.1f} MB/s (first send until flush returned)",
              flush=True)

        reader = readback.read_all_confluent if args.reader == "confluent" \
            else readback.read_all_kafka_python
        t0 = time.perf_counter()
        records = reader(bootstrap, topic, expected_count=n + args.partitions,
                         timeout=60 + n / 10_000)
        print(f"read back {len(records) - args.partitions:,} records (+{args.partitions} "
              f"warm-up) with {args.reader} in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        problems = verify(records, n, recs, args.partitions)
        del records
    finally:
        if cluster is not None:
            cluster.stop()
    if problems:
        print("MISMATCH:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    print(f"OK: all {n:,} records present once, keys and values match, per-partition order "
          "kept" + (", keyed records in Java's murmur2 partition" if args.key_every else ""))
    return 0


def _create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait for leaders
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after 30s")


if __name__ == "__main__":
    sys.exit(main())
