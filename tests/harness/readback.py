"""Independent read-back of what a producer wrote, with clients this project did not write.

Two readers (kafka-python's KafkaConsumer and confluent-kafka's Consumer, both with manual
assignment of every partition from the beginning, no consumer group) return the same
normalized :class:`Record` lists, sorted by (partition, offset). :func:`compare` checks a
list of sent records against them and fails with a message naming the first difference.
Both take ``security=``: a dict of kafka-python settings (security_protocol, sasl_*, ssl_*,
e.g. ``SecureKafkaCluster.client_config()``), translated for confluent-kafka by
:func:`confluent_security`.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Iterable, NamedTuple

__all__ = ["Record", "Sent", "read_all", "read_all_kafka_python", "read_all_confluent",
           "compare", "normalize_headers", "confluent_security", "end_offsets",
           "assert_no_open_transaction"]


class Record(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list  # [(str, bytes | None)]
    timestamp: int  # ms


class Sent(NamedTuple):
    """What a test sent. ``partition``/``offset``/``timestamp`` None = not checked."""
    key: bytes | None
    value: bytes | None
    headers: list = []
    timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None


def normalize_headers(headers) -> list:
    """[(str, bytes | None)] from a list of pairs / dict / None."""
    if not headers:
        return []
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for k, v in items:
        if isinstance(k, bytes):
            k = k.decode("utf-8")
        if v is not None and not isinstance(v, bytes):
            v = bytes(v)
        out.append((k, v))
    return out


def _sorted(records: list) -> list:
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def _need(expected_count, n, ends, positions) -> bool:
    at_end = all(positions.get(p, 0) >= e for p, e in ends.items())
    return not at_end or (expected_count is not None and n < expected_count)


# kafka-python security setting -> librdkafka property
_CONFLUENT_KEYS = {
    "security_protocol": "security.protocol", "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username", "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "ssl_cafile": "ssl.ca.location", "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location", "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location", "ssl_ciphers": "ssl.cipher.suites",
}


def confluent_security(security: dict | None) -> dict:
    """confluent-kafka properties for kafka-python security settings (``bootstrap_servers``
    is ignored; a setting with no librdkafka equivalent is a ValueError)."""
    out = {}
    for k, v in (security or {}).items():
        if v is None or k == "bootstrap_servers":
            continue
        if k in _CONFLUENT_KEYS:
            out[_CONFLUENT_KEYS[k]] = v
        elif k == "ssl_check_hostname":
            out["ssl.endpoint.identification.algorithm"] = "https" if v else "none"
        elif k == "sasl_oauth_token_provider":
            out["oauth_cb"] = _oauth_cb(v)
        else:
            raise ValueError(f"no confluent-kafka equivalent for {k!r}")
    if out.get("sasl.mechanism") == "GSSAPI":
        out.setdefault("sasl.kerberos.kinit.cmd", "")  # MIT krb5 uses KRB5_CLIENT_KTNAME
    return out


def _oauth_cb(provider):
    def cb(_config):  # (token, absolute expiry in s, principal, extensions)
        return (provider.token(), time.time() + 3600, getattr(provider, "sub", "") or "",
                dict(provider.extensions() or {}))
    return cb


def read_all_kafka_python(bootstrap: str, topic: str, expected_count: int | None = None,
                          timeout: float = 30.0, *, security: dict | None = None,
                          **consumer_config) -> list[Record]:
    """All records of ``topic`` via kafka-python: read up to the end offsets seen at start
    and until ``expected_count`` records arrived; TimeoutError if that takes > ``timeout``."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    cfg = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
               auto_offset_reset="earliest", consumer_timeout_ms=500)
    cfg.update({k: v for k, v in (security or {}).items() if k != "bootstrap_servers"})
    cfg.update(consumer_config)
    consumer = KafkaConsumer(**cfg)
    try:
        parts = None
        while not parts:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {topic!r} has no partitions in metadata")
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while True:
            try:
                ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        out: list[Record] = []
        positions: dict[int, int] = {}
        while _need(expected_count, len(out), ends, positions):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"read {len(out)} of {expected_count} records from {topic!r} "
                                   f"(end offsets {ends}, positions {positions})")
            batches = consumer.poll(timeout_ms=int(min(left, 0.5) * 1000))
            for tp, msgs in batches.items():
                for m in msgs:
                    out.append(Record(m.partition, m.offset, m.key, m.value,
                                      normalize_headers(m.headers), m.timestamp))
            for tp in tps:
                positions[tp.partition] = consumer.position(tp)
        return _sorted(out)
    finally:
        consumer.close()


def read_all_confluent(bootstrap: str, topic: str, expected_count: int | None = None,
                       timeout: float = 30.0, *, security: dict | None = None,
                       **consumer_config) -> list[Record]:
    """Same as :func:`read_all_kafka_python` with confluent-kafka (librdkafka)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition, OFFSET_BEGINNING

    deadline = time.monotonic() + timeout
    cfg = {"bootstrap.servers": bootstrap, "group.id": f"pyprod-readback-{uuid.uuid4().hex}",
           "enable.auto.commit": False, "enable.partition.eof": False,
           "auto.offset.reset": "earliest"}
    cfg.update(confluent_security(security))
    cfg.update(consumer_config)
    consumer = Consumer(cfg)
    try:
        parts = None
        while not parts:
            with_md = consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
            t = with_md.topics.get(topic)
            parts = sorted(t.partitions) if t is not None and t.error is None else None
            if not parts:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"topic {topic!r} has no partitions in metadata")
                time.sleep(0.1)
        ends = {}
        for p in parts:  # retried: right after a restart/failover the leader may lag
            while True:
                try:
                    ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                             timeout=5)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[Record] = []
        positions: dict[int, int] = {}
        while _need(expected_count, len(out), ends, positions):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"read {len(out)} of {expected_count} records from {topic!r} "
                                   f"(end offsets {ends}, positions {positions})")
            for m in consumer.consume(num_messages=1000, timeout=min(left, 0.5)):
                if m.error():
                    raise KafkaException(m.error())
                out.append(Record(m.partition(), m.offset(), m.key(), m.value(),
                                  normalize_headers(m.headers()), m.timestamp()[1]))
                positions[m.partition()] = m.offset() + 1
            for tp in consumer.position([TopicPartition(topic, p) for p in parts]):
                if tp.offset >= 0:
                    positions[tp.partition] = max(positions.get(tp.partition, 0), tp.offset)
        return _sorted(out)
    finally:
        consumer.close()


read_all = read_all_kafka_python


def _fmt(v, limit=60):
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + f"...({len(v)} bytes)"


def compare(sent: Iterable, read: list[Record], *, check_timestamps: bool = True,
            check_headers: bool = True) -> None:
    """Assert ``read`` holds exactly ``sent``, in order.

    ``sent`` items are :class:`Sent`, dicts with the same keys, or objects with those
    attributes. If every sent record names its partition, records are matched per
    partition in send order (and offsets, where given, must match too); otherwise per key
    (a key always maps to one partition, so per-key order must hold) plus an overall
    multiset check. Raises AssertionError describing the first difference.
    """
    items = [_as_sent(s) for s in sent]
    if len(items) != len(read):
        raise AssertionError(f"sent {len(items)} records but read {len(read)} "
                             f"(per partition read: {_counts(read)})")
    if items and all(s.partition is not None for s in items):
        groups_s, groups_r = defaultdict(list), defaultdict(list)
        for s in items:
            groups_s[s.partition].append(s)
        for r in sorted(read, key=lambda r: (r.partition, r.offset)):
            groups_r[r.partition].append(r)
        label = "partition"
    else:
        groups_s, groups_r = defaultdict(list), defaultdict(list)
        for s in items:
            groups_s[s.key].append(s)
        for r in sorted(read, key=lambda r: (r.partition, r.offset)):
            groups_r[r.key].append(r)
        label = "key"
    for g in sorted(set(groups_s) | set(groups_r), key=repr):
        ss, rr = groups_s.get(g, []), groups_r.get(g, [])
        if len(ss) != len(rr):
            raise AssertionError(f"{label} {_fmt(g)}: sent {len(ss)} records, read {len(rr)}")
        if label == "key" and g is None:
            # null keys are spread over partitions: no order to check, only the contents
            def flat(x):
                return (x.value or b"", repr(normalize_headers(x.headers)))
            if sorted(map(flat, ss)) != sorted(map(flat, rr)):
                raise AssertionError("records with key None: sent and read values/headers differ")
            continue
        if label == "key" and len({r.partition for r in rr}) > 1:
            raise AssertionError(f"key {_fmt(g)} was spread over partitions "
                                 f"{sorted({r.partition for r in rr})}")
        for i, (s, r) in enumerate(zip(ss, rr)):
            where = f"{label} {_fmt(g)} record #{i} (partition {r.partition} offset {r.offset})"
            if s.offset is not None and s.offset != r.offset:
                raise AssertionError(f"{where}: sent offset {s.offset}, read {r.offset}")
            if s.key != r.key:
                raise AssertionError(f"{where}: key sent {_fmt(s.key)} read {_fmt(r.key)}")
            if s.value != r.value:
                raise AssertionError(f"{where}: value sent {_fmt(s.value)} read {_fmt(r.value)}")
            if check_headers and normalize_headers(s.headers) != r.headers:
                raise AssertionError(f"{where}: headers sent {normalize_headers(s.headers)!r} "
                                     f"read {r.headers!r}")
            if check_timestamps and s.timestamp is not None and s.timestamp != r.timestamp:
                raise AssertionError(f"{where}: timestamp sent {s.timestamp} read {r.timestamp}")
        if label == "partition":
            offs = [r.offset for r in rr]
            if offs != sorted(set(offs)):
                raise AssertionError(f"partition {g}: offsets not strictly increasing: {offs[:20]}")


def _as_sent(s) -> Sent:
    if isinstance(s, Sent):
        return s
    if isinstance(s, dict):
        return Sent(**s)
    return Sent(*(getattr(s, f, d) for f, d in
                  zip(Sent._fields, (None, None, [], None, None, None))))


def _counts(read) -> dict:
    c: dict = defaultdict(int)
    for r in read:
        c[r.partition] += 1
    return dict(sorted(c.items()))


def end_offsets(bootstrap: str, topic: str, committed: bool) -> dict:
    """{partition: end offset} as kafka-python sees it: the last stable offset under
    read_committed (held back by any open transaction), the high watermark otherwise."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level=(
        "read_committed" if committed else "read_uncommitted"))
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        return {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def assert_no_open_transaction(bootstrap: str, topic: str) -> None:
    """Every partition's last stable offset equals its high watermark."""
    stable, high = end_offsets(bootstrap, topic, True), end_offsets(bootstrap, topic, False)
    assert stable == high, "open transactions hold back %s: LSO %s, HWM %s" % (
        topic, stable, high)
