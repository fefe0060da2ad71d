"""AWS_MSK_IAM end to end against a broker that VERIFIES the SigV4 signature
(tests/harness/msk_iam_broker.py: Apache Kafka with a Java SaslServer recomputing it): credentials
from the AWS environment, produce over SASL_SSL, read back by kafka-python over PLAINTEXT; wrong
secret, skewed clock and wrong region refused, typed, never showing a secret; kafka-python's own
mechanism passes the same verifier; credentials resolved once per producer, refreshed off the
Sender thread, missing ones fail the constructor."""
import datetime
import logging
import threading
import time
import traceback
import uuid

import pytest

from pyprod import KafkaProducer, errors
from pyprod.sasl import aws_msk_iam
from tests.harness.forked import needs_fork, run_forked
from tests.harness.msk_iam_broker import (ACCESS_KEY, REGION, SECRET_KEY, SESSION_TOKEN,
                                          MskIamKafkaCluster)
from tests.harness.readback import read_all_kafka_python

WRONG_SECRET = "wrongTestSecret/AAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
SECRETS = (SECRET_KEY, SESSION_TOKEN, WRONG_SECRET)


@pytest.fixture(scope="module")
def msk_kafka():
    cluster = MskIamKafkaCluster()
    cluster.start()
    yield cluster
    cluster.stop(kill=True)


@pytest.fixture
def aws_env(monkeypatch):
    """The test identity in the environment, nothing else of the botocore chain."""
    for key, value in (("AWS_ACCESS_KEY_ID", ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
                       ("AWS_SESSION_TOKEN", SESSION_TOKEN), ("AWS_DEFAULT_REGION", REGION),
                       ("AWS_CONFIG_FILE", "/nonexistent"),
                       ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
                       ("AWS_EC2_METADATA_DISABLED", "true")):
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_REGION", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def _topic(cluster):
    return cluster.create_topic("msk-" + uuid.uuid4().hex[:8], 1)


def test_produce_and_read_back(msk_kafka, aws_env):
    """send() and send_batch() over SASL_SSL AWS_MSK_IAM; kafka-python reads them back over
    PLAINTEXT: count, order, keys, values, headers."""
    topic = _topic(msk_kafka)
    cfg = msk_kafka.client_config("SASL_SSL", "AWS_MSK_IAM")
    want = []
    with KafkaProducer(**cfg) as producer:
        for i in range(10):
            rec = (b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)])
            want.append(rec)
            producer.send(topic, rec[1], key=rec[0], headers=rec[2])
        batch = [(b"bk%d" % i, b"bv%d" % i, [("b", b"x" * i)]) for i in range(10)]
        want += batch
        producer.send_batch(topic, [r[1] for r in batch], keys=[r[0] for r in batch],
                            headers=[r[2] for r in batch]).get(timeout=30)
        producer.flush()
    got = read_all_kafka_python(msk_kafka.bootstrap_servers, topic, expected_count=20)
    assert [(r.key, r.value, list(r.headers)) for r in got] == want


def test_kafka_python_passes_the_same_verifier(msk_kafka, aws_env):
    """kafka-python's own AWS_MSK_IAM: the broker's check does not depend on pyprod's code."""
    import kafka
    topic = _topic(msk_kafka)
    producer = kafka.KafkaProducer(**msk_kafka.client_config("SASL_SSL", "AWS_MSK_IAM"))
    try:
        producer.send(topic, b"from-kafka-python").get(timeout=30)
    finally:
        producer.close()
    got = read_all_kafka_python(msk_kafka.bootstrap_servers, topic, expected_count=1)
    assert [r.value for r in got] == [b"from-kafka-python"]


def _skew_clock(env):
    env.setattr(aws_msk_iam.AwsMskIamCredentials, "clock",
                staticmethod(lambda: time.time() - 3600))  # signed an hour ago: expired


@pytest.mark.parametrize("change,reason", [
    (lambda env: env.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET), "signature does not match"),
    (_skew_clock, "expired"),
    (lambda env: env.setenv("AWS_DEFAULT_REGION", "us-east-1"), "region"),
], ids=["wrong-secret", "clock-past-expiry", "wrong-region"])
def test_refused_typed_without_secret(msk_kafka, aws_env, caplog, change, reason):
    """A typed SaslAuthenticationFailedError with the broker's reason (not a timeout: the refusal
    ends the wait), from the constructor's bootstrap and, with api_version given, from send();
    no secret in the logs or the exceptions."""
    change(aws_env)
    cfg = msk_kafka.client_config("SASL_SSL", "AWS_MSK_IAM")
    shown = []
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(errors.SaslAuthenticationFailedError, match=reason) as info:
            KafkaProducer(max_block_ms=60_000, bootstrap_timeout_ms=60_000, **cfg).close()
        shown.append(info.value)
        with KafkaProducer(api_version=(2, 8, 0), max_block_ms=60_000, **cfg) as producer:
            with pytest.raises(errors.SaslAuthenticationFailedError, match=reason) as info:
                producer.send(_topic(msk_kafka), b"refused").get(timeout=60)  # no bootstrap
        shown.append(info.value)
    shown = caplog.text + "".join("".join(traceback.format_exception(e)) for e in shown)
    assert not [s for s in SECRETS if s in shown]


@pytest.mark.parametrize("missing", ["credentials", "region"])
def test_constructor_fails_fast(aws_env, missing):
    """Missing credentials or region: KafkaConfigurationError from the constructor (no broker
    is contacted; port 1 listens nowhere)."""
    if missing == "credentials":
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            aws_env.delenv(key)
    else:
        aws_env.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(errors.KafkaConfigurationError, match=missing):
        KafkaProducer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                      sasl_mechanism="AWS_MSK_IAM")


def test_refreshable_credentials_off_the_sender(msk_kafka, aws_env):
    """botocore RefreshableCredentials (an instance role's shape): resolved at construction,
    refreshed on pyprod's refresh thread; neither botocore nor the refresh ever runs on a thread
    that signs (the Sender's), and close() stops the refresher."""
    from botocore.credentials import RefreshableCredentials
    import botocore.session
    botocore_threads, signing_threads, refreshed = set(), set(), threading.Event()

    def metadata():
        botocore_threads.add(threading.current_thread())
        if threading.current_thread().name == "pyprod-aws-msk-iam-refresh":
            refreshed.set()
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
        return {"access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "token": SESSION_TOKEN,
                "expiry_time": expiry.isoformat()}  # < 10 min left: botocore refreshes each time

    def get_credentials(session):
        botocore_threads.add(threading.current_thread())
        return RefreshableCredentials.create_from_metadata(metadata(), metadata, "test-role")

    real_first = aws_msk_iam.AwsMskIamSaslClient.first

    def first(mech):
        signing_threads.add(threading.current_thread())
        return real_first(mech)
    aws_env.setattr(botocore.session.Session, "get_credentials", get_credentials)
    aws_env.setattr(aws_msk_iam.AwsMskIamSaslClient, "first", first)
    aws_env.setattr(aws_msk_iam.AwsMskIamCredentials, "REFRESH_PERIOD_S", 0.2)
    topic = _topic(msk_kafka)
    producer = KafkaProducer(**msk_kafka.client_config("SASL_SSL", "AWS_MSK_IAM"))
    try:
        creds = producer._token_provider
        assert refreshed.wait(30), "the refresher never refreshed"
        producer.send(topic, b"refreshed").get(timeout=30)
        producer.send(topic, b"again").get(timeout=30)
    finally:
        producer.close()
    assert producer._sender in signing_threads  # the Sender signed...
    assert not botocore_threads & signing_threads  # ...and never called botocore
    assert {t.name for t in botocore_threads} == {"MainThread", "pyprod-aws-msk-iam-refresh"}
    assert not creds._thread.is_alive()
    got = read_all_kafka_python(msk_kafka.bootstrap_servers, topic, expected_count=2)
    assert [r.value for r in got] == [b"refreshed", b"again"]


def test_refresh_rotates_and_survives_failures(aws_env, caplog):
    """The refresher's new keys sign the next authentication; a failed refresh keeps the current
    keys and logs its type only. No broker: the signing keys are read from the payload."""
    import json
    from botocore.credentials import RefreshableCredentials
    import botocore.session
    calls, go, rotated, failed = [], threading.Event(), threading.Event(), threading.Event()

    def metadata():
        if threading.current_thread().name != "MainThread":
            go.wait()  # the refresher waits until the construction's keys are checked
        calls.append(threading.current_thread().name)
        if len(calls) > 3:
            failed.set()
            raise RuntimeError("metadata service down")
        if len(calls) == 3:
            rotated.set()
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
        return {"access_key": "AKIAROTATED%d" % len(calls), "secret_key": SECRET_KEY,
                "token": None, "expiry_time": expiry.isoformat()}
    aws_env.setattr(botocore.session.Session, "get_credentials", lambda session:
                    RefreshableCredentials.create_from_metadata(metadata(), metadata, "test"))
    aws_env.setattr(aws_msk_iam.AwsMskIamCredentials, "REFRESH_PERIOD_S", 0.05)
    creds = aws_msk_iam.AwsMskIamCredentials(["127.0.0.1"])
    try:
        def signed_by():
            msg = json.loads(aws_msk_iam.AwsMskIamSaslClient("127.0.0.1", creds).first())
            return msg["x-amz-credential"].split("/")[0]
        assert calls == ["MainThread", "MainThread"] and signed_by() == "AKIAROTATED2"
        go.set()
        assert rotated.wait(30) and failed.wait(30)
        assert signed_by() == "AKIAROTATED3"  # the last good refresh
        assert set(calls[2:]) == {"pyprod-aws-msk-iam-refresh"}
    finally:
        go.set()
        creds.close()
    assert not creds._thread.is_alive()
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("pyprod")]
    assert any("refresh failed (RuntimeError)" in m for m in ours)
    assert not [m for m in ours if "service down" in m or SECRET_KEY in m]  # the type only


@needs_fork
def test_forked_child_gets_its_own_refresher(aws_env):
    """A forked child's first signing starts the child's own refresh thread (threads do not
    survive fork), which refreshes there."""
    from botocore.credentials import RefreshableCredentials
    import botocore.session
    refreshed = threading.Event()

    def metadata():
        if threading.current_thread().name == "pyprod-aws-msk-iam-refresh":
            refreshed.set()
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=5)
        return {"access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "token": None,
                "expiry_time": expiry.isoformat()}
    aws_env.setattr(botocore.session.Session, "get_credentials", lambda session:
                    RefreshableCredentials.create_from_metadata(metadata(), metadata, "test"))
    aws_env.setattr(aws_msk_iam.AwsMskIamCredentials, "REFRESH_PERIOD_S", 3600.0)
    creds = aws_msk_iam.AwsMskIamCredentials(["127.0.0.1"])
    parent_thread = creds._thread

    def child():
        assert not refreshed.is_set()
        assert creds.frozen().access_key == ACCESS_KEY  # restarts the refresher, waiting 0 s
        assert creds._thread is not parent_thread and refreshed.wait(30)
        creds.close()
        assert not creds._thread.is_alive()
    try:
        run_forked(child)
        assert creds._thread is parent_thread and parent_thread.is_alive()
    finally:
        creds.close()
