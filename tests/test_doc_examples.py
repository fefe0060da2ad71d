"""Every ```python block of README.md and docs/ runs (the Spark ones in
tests/spark/test_spark_doc_examples.py): against the suite's broker, or the secured one for
blocks with security settings, with the names the prose defines around a block supplied here."""
import os

import pytest

from pyprod import KafkaProducer, TopicPartition
from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider
from tests.harness import doc_examples
from tests.harness.security import USERS

PLAIN = doc_examples.blocks("plain")


def test_every_block_is_run_somewhere():
    every = doc_examples.blocks()
    assert PLAIN and len(PLAIN) + len(doc_examples.blocks("spark")) == len(every)


def _givens(bootstrap):
    """What the docs' prose defines around its blocks: a producer, a consumer, some data."""
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="doc-examples",
                             enable_auto_commit=False)
    return {"os": os, "KafkaProducer": KafkaProducer,
            "producer": KafkaProducer(bootstrap_servers=bootstrap),
            "values": [b"value-%d" % i for i in range(100)],
            "keys": [b"key-%d" % (i % 7) for i in range(100)],
            "consumer": consumer, "offsets": {TopicPartition("orders-in", 0): 1},
            "fetch_token_from_my_identity_provider": UnsecuredTokenProvider("alice").token}


@pytest.fixture(scope="module")
def input_topic(kafka):
    """The consumed topic of the docs' consume-transform-produce example."""
    kafka.create_topic("orders-in", 1)


@pytest.mark.parametrize("block", PLAIN, ids=[b.id for b in PLAIN])
def test_doc_block_runs(block, request, kafka, input_topic, monkeypatch):
    certs = None
    bootstrap = kafka.bootstrap_servers
    if block.secure:
        secured = request.getfixturevalue("kafka_secure")
        certs = secured.certs
        bootstrap = secured.listener(doc_examples.secure_listener(block.code))
        monkeypatch.setenv("KAFKA_PASSWORD", USERS["alice"])
        monkeypatch.setenv("KEY_PASSPHRASE", certs.client_key_password)
        monkeypatch.setenv("SSL_CERT_FILE", certs.ca_file)  # "the system trust store"
    namespace = doc_examples.namespace(_givens(kafka.bootstrap_servers))
    try:
        doc_examples.run(doc_examples.prepare(block, bootstrap, certs), block.id, namespace)
    finally:
        namespace["consumer"].close()
        doc_examples.close_producers(namespace)
