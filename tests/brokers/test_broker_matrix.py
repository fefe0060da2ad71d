"""pyprod on every supported Apache Kafka line (issue 43 part 1), as a kafka-python user would use
it: each test runs on each broker of tests/brokers/conftest.py's ``broker`` fixture, writes with
pyprod and reads back with confluent-kafka and kafka-python (count, per-partition order and
offsets, keys, values, headers). A feature the broker lacks (zstd before 2.1) must be refused
with a typed error naming the feature and the version it needs, and nothing written."""

from __future__ import annotations

import uuid

import pytest

import pyprod
from pyprod import errors
from tests.harness.broker_matrix import selected_versions, start_broker, supports
from tests.harness.readback import (Sent, assert_no_open_transaction, compare,
                                    read_all_confluent, read_all_kafka_python)

CODECS = ("gzip", "snappy", "lz4", "zstd")


def _topic(broker, partitions: int = 3) -> str:
    return broker.create_topic(f"matrix-{uuid.uuid4().hex[:12]}", partitions)


def _producer(broker, **config) -> pyprod.KafkaProducer:
    config.setdefault("bootstrap_servers", broker.bootstrap_servers)
    return pyprod.KafkaProducer(max_block_ms=30000, **config)


def _records(n: int, tag: str, keyed: bool = True, headers: bool = False) -> list[Sent]:
    return [Sent(key=b"k%d" % (i % 7) if keyed else None, value=b"%s-%d" % (tag.encode(), i),
                 headers=[("h", b"%d" % i), ("tag", tag.encode())] if headers else [])
            for i in range(n)]


def _send(producer, topic: str, records: list[Sent], **send_kw) -> list[Sent]:
    """send() each record; returns them with the partition and offset the broker gave."""
    futures = [producer.send(topic, r.value, key=r.key, headers=r.headers or None, **send_kw)
               for r in records]
    producer.flush(60)
    out = []
    for r, f in zip(records, futures):
        md = f.get(60)
        out.append(r._replace(partition=md.partition, offset=md.offset))
    return out


def _read_back(broker, topic: str, sent: list[Sent], readers=None, security=None,
               committed: bool = False) -> None:
    """Both independent clients read exactly ``sent`` back (with its partitions and offsets
    where known; by key otherwise); ``committed``: with read_committed."""
    bootstrap = (security or {}).get("bootstrap_servers", broker.bootstrap_servers)
    for reader in readers or (read_all_confluent, read_all_kafka_python):
        iso = {}
        if committed:
            iso = ({"isolation.level": "read_committed"} if reader is read_all_confluent
                   else {"isolation_level": "read_committed"})
        got = reader(bootstrap, topic, expected_count=len(sent), security=security, **iso)
        compare(sent, got)


def test_send_keyed_and_keyless(broker):
    topic = _topic(broker)
    with _producer(broker) as p:
        sent = _send(p, topic, _records(60, "keyed") + _records(60, "keyless", keyed=False))
    assert {s.partition for s in sent} == {0, 1, 2}
    _read_back(broker, topic, sent)


def test_send_batch_keyed_and_keyless(broker):
    topic = _topic(broker)
    records = _records(200, "batch") + _records(100, "batch-nokey", keyed=False)
    with _producer(broker) as p:
        md = p.send_batch(topic, [r.value for r in records],
                          keys=[r.key for r in records]).get(60)
    assert md.record_count == len(records)
    _read_back(broker, topic, records)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker, acks):
    topic = _topic(broker)
    # acks=0 cannot retry: a partition whose log the broker is still creating drops its records
    # (seen on 4.4.0 right after create_topic), so each partition first takes an acked write
    warm = [Sent(None, b"warm-%d" % part, partition=part) for part in range(3)]
    with _producer(broker) as p:
        for r in warm:
            p.send(topic, r.value, partition=r.partition).get(60)
    records = [r._replace(partition=None) for r in warm] + _records(90, f"acks{acks}")
    with _producer(broker, acks=acks) as p:
        futures = [p.send(topic, r.value, key=r.key) for r in records[3:]]
        p.flush(60)
        for f in futures:
            f.get(60)  # acks=0: completes without an offset
    _read_back(broker, topic, records)


def test_idempotence_by_default(broker):
    topic = _topic(broker)
    with _producer(broker) as p:
        assert p.config["enable_idempotence"] is True
        sent = _send(p, topic, _records(150, "idem"))
    for part in {s.partition for s in sent}:  # one producer: offsets 0.. without gaps
        offs = [s.offset for s in sent if s.partition == part]
        assert offs == list(range(len(offs)))
    _read_back(broker, topic, sent)


@pytest.mark.parametrize("codec", CODECS)
def test_codec(broker, codec):
    topic = _topic(broker)
    records = _records(200, codec, headers=True)
    if codec != "zstd" or supports(broker.version, "zstd"):
        with _producer(broker, compression_type=codec) as p:
            sent = _send(p, topic, records)
        _read_back(broker, topic, sent, readers=[read_all_confluent])
        return
    # the broker lacks zstd (before 2.1): a typed refusal naming zstd and 2.1, nothing written
    with pytest.raises(errors.KafkaError) as info:
        with _producer(broker, compression_type=codec) as p:
            p.send(topic, b"v", key=b"k").get(60)
    e = info.value
    assert isinstance(e, errors.UnsupportedCompressionTypeError), repr(e)
    assert "zstd" in str(e).lower() and "2.1" in str(e), repr(e)
    assert read_all_confluent(broker.bootstrap_servers, topic, timeout=10) == []


def test_headers(broker):
    topic = _topic(broker)
    records = _records(100, "hdr", headers=True)
    records[0] = records[0]._replace(headers=[("empty", b""), ("null", None)])
    with _producer(broker) as p:
        sent = _send(p, topic, records)
    _read_back(broker, topic, sent)


def _transactions(broker, v2: bool) -> None:
    """commit, abort, commit (120 records each); the committed ones read back read_committed,
    all 360 read_uncommitted. ``v2``: the protocol the producer must pick."""
    topic = _topic(broker)
    committed = []
    with _producer(broker, transactional_id=f"matrix-{uuid.uuid4().hex}") as p:
        p.init_transactions()
        tm = p.transaction_manager
        assert (tm.client.transaction_version() >= 2) is v2
        epoch0 = tm.producer_id_and_epoch()[1]
        for n, outcome in enumerate(("commit", "abort", "commit")):
            p.begin_transaction()
            sent = _send(p, topic, _records(120, f"txn{n}"))
            assert tm._v2 is v2  # the protocol this transaction runs
            if outcome == "commit":
                p.commit_transaction()
                committed += sent
            else:
                p.abort_transaction()
        # v2: EndTxn gives the next epoch each time; v1 keeps the one InitProducerId gave
        assert tm.producer_id_and_epoch()[1] - epoch0 == (3 if v2 else 0)
    # offsets as sent: the commit and abort markers take offsets in between
    _read_back(broker, topic, committed, committed=True)
    everything = read_all_confluent(broker.bootstrap_servers, topic, expected_count=360,
                                    **{"isolation.level": "read_uncommitted"})
    assert len(everything) == 360  # the aborted ones are in the log, marked aborted
    assert_no_open_transaction(broker.bootstrap_servers, topic)


def test_transactions_commit_and_abort(broker):
    """The same program on every broker: transactions v2 (KIP-890: no AddPartitionsToTxn, the
    epoch bumped at each end) where the broker finalized transaction.version 2 (4.x formats
    so), v1 elsewhere (3.x has no such feature: it negotiates down)."""
    _transactions(broker, v2=supports(broker.version, "transactions_v2"))


@pytest.mark.parametrize("version", [v for v in selected_versions() if supports(v, "kraft4")])
def test_transactions_v1_on_4x_without_tv2(version):
    """A 4.x broker formatted with transaction.version=1: the same program runs v1."""
    cluster = start_broker(version, features={"transaction.version": 1})
    try:
        _transactions(cluster, v2=False)
    finally:
        cluster.stop(timeout=15)


def _secured_round_trip(broker, security: dict, tag: str, **config) -> None:
    """pyprod writes over ``security``'s listener, both readers read back over it."""
    topic = _topic(broker)
    if "SASL" in security["security_protocol"] and not supports(broker.version, "sasl"):
        # 0.11: raw tokens after SaslHandshake v0
        with pytest.raises(errors.UnsupportedVersionError, match=r"Kafka 1\.0 or newer"):
            _producer(broker, **security).close()
        return
    with _producer(broker, **security, **config) as p:
        sent = _send(p, topic, _records(100, tag, headers=True))
    _read_back(broker, topic, sent, security=security)


def test_scram_sha_256(broker):
    _secured_round_trip(broker, broker.scram_config(), "scram")


def test_ssl(broker):
    _secured_round_trip(broker, broker.ssl_config(), "ssl")


def test_sasl_ssl_scram_sha_256(broker):
    _secured_round_trip(broker, broker.sasl_ssl_config(), "sasl-ssl", compression_type="lz4")


@pytest.mark.parametrize("api_version", [(0, 10, 1), "0.10.1", (0, 9)],
                         ids=["0.10.1", "str0.10.1", "0.9"])
def test_api_version_older_than_0_11(broker, api_version, caplog):
    """kafka-python's api_version key: no ApiVersions probe in the constructor, and (KIP-679 as
    kafka-python 3.x) idempotence off with a warning when not asked for, a
    KafkaConfigurationError when asked. kafka-python then writes v0/v1 message sets; pyprod
    writes record batches (v2) only, which every supported broker takes: the records land."""
    topic = _topic(broker, 1)
    with caplog.at_level("WARNING", logger="pyprod.config"):
        p = _producer(broker, api_version=api_version)
    with p:
        assert p.config["enable_idempotence"] is False
        assert "Idempotence will be disabled" in caplog.text
        sent = _send(p, topic, _records(50, "apiv"))
    _read_back(broker, topic, sent)
    with pytest.raises(errors.KafkaConfigurationError, match=r"requires broker >= 0\.11"):
        _producer(broker, api_version=api_version, enable_idempotence=True)
