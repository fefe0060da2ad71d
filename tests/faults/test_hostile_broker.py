"""The producer against brokers that misbehave on purpose (tests.harness.hostile_broker).

One test per behaviour. Each asserts the typed error (pyprod.errors, kafka-python's names),
that every future of send() and send_batch() completes by its deadline (delivery_timeout_ms plus
one request_timeout_ms, with a 2x margin: a functional bound, not a speed test), that flush() and
close(timeout) return, and, through the autouse io_thread_errors fixture, that the I/O thread
logged no error and no thread raised. Huge sizes and junk streams also check memory: the frame
is refused before anything is sized from it, and RSS stays flat.
"""
import time
import tracemalloc

import pytest

from pyprod import KafkaProducer, errors
from pyprod import config as pconfig
from pyprod.producer import metadata_for, network_client_for
from pyprod.protocol import api_versions, init_producer_id, produce
from pyprod.protocol import metadata as metadata_api
from tests.harness import hostile_broker as hb

DELIVERY_MS, REQUEST_MS = 2500, 1000
BOUND = 2 * (DELIVERY_MS + REQUEST_MS) / 1000.0  # s: every future is done by then
BOOTSTRAP_MS = 1000
MIB = 1 << 20
TOPIC = "hostile"

pytestmark = pytest.mark.usefixtures("io_thread_errors")


# -- helpers --------------------------------------------------------------------------------------

def send_some(p, topic=TOPIC, n=4):
    """n send() futures and one send_batch() future of 2 records."""
    futures = [p.send(topic, b"v%d" % i, key=b"k%d" % i) for i in range(n)]
    futures.append(p.send_batch(topic, [b"b0", b"b1"], keys=[b"k0", b"k1"]))
    return futures


def wait_done(futures, since, bound=BOUND):
    """Wait (at most until since + bound) for every future; fail naming those still pending."""
    while time.monotonic() < since + bound and not all(f.is_done for f in futures):
        time.sleep(0.01)
    pending = [f for f in futures if not f.is_done]
    assert not pending, "%d of %d futures still pending %.1f s after send()" % (
        len(pending), len(futures), time.monotonic() - since)


def failures(futures):
    """Every record's exception (a send_batch failure counts once per failed record)."""
    out = []
    for f in futures:
        e = f.exception
        if isinstance(e, errors.BatchDeliveryError):
            out.extend(x for _, x in e.failures)
        elif e is not None:
            out.append(e)
    return out


def assert_all_failed(futures, *types):
    found = failures(futures)
    assert all(f.failed() for f in futures), [f.exception for f in futures]
    bad = [e for e in found if not isinstance(e, types)]
    assert not bad, "untyped or unexpected errors: %r" % bad[:3]


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def returns_within(fn, seconds):
    """Run fn(); assert it returned within seconds (+1 s of slack for a loaded machine)."""
    start = time.monotonic()
    fn()
    took = time.monotonic() - start
    assert took < seconds + 1.0, "%s took %.1f s (bound %.1f s)" % (fn, took, seconds)


def raises_within(error, fn, seconds):
    """fn() raises error within seconds (+1 s of slack)."""
    start = time.monotonic()
    with pytest.raises(error) as info:
        fn()
    took = time.monotonic() - start
    assert took < seconds + 1.0, "%s took %.1f s (bound %.1f s)" % (fn, took, seconds)
    return info.value


def last_error(closes, node=1):
    """The error node's connection was last closed with (closes: the fixture)."""
    found = [e for n, e in closes if n == node]
    return found[-1] if found else None


def misbehave_on_produce(hostile_broker, producer, action, **config):
    """A producer bootstrapped normally from a broker that meets every Produce with action;
    the futures of one round of sends, done by the deadline. Returns (producer, futures)."""
    broker = hostile_broker(topics={TOPIC: 2})
    broker.on(produce.API_KEY, action)
    p = producer(broker.bootstrap_servers, **config)
    start = time.monotonic()
    futures = send_some(p)
    wait_done(futures, start)
    returns_within(lambda: p.flush(timeout=1), 1)
    return p, futures


def first_connection_error(bootstrap_servers, node=-1):
    """Poll a bare NetworkClient (the producer's network layer) until node's connection fails;
    that error. A long reconnect backoff keeps it from being replaced."""
    cfg = pconfig.build(bootstrap_servers=bootstrap_servers, request_timeout_ms=REQUEST_MS,
                        reconnect_backoff_ms=10_000)
    md = metadata_for(cfg)
    nc = network_client_for(cfg, md)
    try:
        md.add_topic(TOPIC)
        deadline = time.monotonic() + BOUND
        while nc.connection_error(node) is None:
            assert time.monotonic() < deadline, "node %s never failed" % node
            nc.network_poll.poll(50)
        return nc.connection_error(node)
    finally:
        nc.network_poll.shutdown()
        md.close()


def bootstrap_fails(hostile, expected=errors.NoBrokersAvailable, **config):
    """The constructor raises expected within its bootstrap bound (NoBrokersAvailable; a broker
    that says it is too old: UnsupportedVersionError, at once), and reconnects with backoff
    meanwhile (20 ms doubling up to 200 ms: about 10 attempts, not thousands)."""
    accepted = hostile.accepted
    error = raises_within(expected, lambda: KafkaProducer(
        bootstrap_servers=hostile.bootstrap_servers, request_timeout_ms=5 * BOOTSTRAP_MS,
        bootstrap_timeout_ms=BOOTSTRAP_MS, api_version_auto_timeout_ms=BOOTSTRAP_MS,
        reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, **config),
        2 * BOOTSTRAP_MS / 1000.0)
    assert hostile.accepted - accepted <= 30, "no reconnect backoff: %d connections" % (
        hostile.accepted - accepted)
    return error


# -- Produce answered wrong -----------------------------------------------------------------------

def test_wrong_correlation_id(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.wrong_correlation_id())
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.CorrelationIdError)
    assert isinstance(last_error(closes), errors.CorrelationIdError)
    returns_within(lambda: p.close(timeout=2), 2)


def test_wrong_correlation_id_without_retries(hostile_broker, producer):
    """retries=0: the batch fails with the connection's own error at once."""
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.wrong_correlation_id(),
                                      retries=0)
    assert_all_failed(futures, errors.CorrelationIdError)


def test_truncated_frame_then_close(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.truncate(0.5))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaConnectionError)
    assert isinstance(last_error(closes), errors.KafkaConnectionError)
    assert "closed by the broker" in str(last_error(closes))


BOGUS_SIZES = (0x7FFFFFFF, -1, -0x80000000, 3)


def test_bogus_frame_size_refused_before_allocation(closes, hostile_broker, producer):
    """A size prefix out of 4..receive_message_max_bytes (2^31-1, negative, below a header)
    closes the connection before any buffer is sized from it: traced memory and RSS stay flat.
    One broker and producer per size, all at once."""
    before = rss()
    cases = []
    tracemalloc.start()
    try:
        start = time.monotonic()
        for size in BOGUS_SIZES:
            broker = hostile_broker(topics={TOPIC: 2}, node_id=100 + len(cases))
            broker.on(produce.API_KEY, hb.frame_size(size))
            p = producer(broker.bootstrap_servers)
            cases.append((size, p, send_some(p)))
        for size, p, futures in cases:
            wait_done(futures, start)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for i, (size, p, futures) in enumerate(cases):
        assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaConnectionError)
        err = last_error(closes, node=100 + i)
        assert isinstance(err, errors.InvalidReceiveError), err
        assert "frame of %d bytes" % size in str(err)
    assert peak < 16 * MIB, peak
    assert rss() - before < 64 * MIB


def test_plausible_size_is_never_preallocated(closes, hostile_broker, producer):
    """A frame claiming 99 MB (under receive_message_max_bytes) that never comes: only the bytes
    that arrived are held, and the request times out."""
    tracemalloc.start()
    try:
        p, futures = misbehave_on_produce(hostile_broker, producer, hb.frame_size(99_000_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.RequestTimedOutError)
    assert isinstance(last_error(closes), errors.RequestTimedOutError)
    assert peak < 16 * MIB, peak


@pytest.mark.parametrize("prefix", [b"", b"\x01\x00\x00\x00"], ids=["junk", "16MiB-of-junk"])
def test_junk_stream_keeps_rss_flat(closes, hostile_broker, producer, prefix):
    """A broker that answers Produce with an endless stream of random bytes (as is, or after a
    size prefix of 16 MiB): typed errors, and RSS stays flat while it streams."""
    before = rss()
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.junk(seed=7, prefix=prefix))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaProtocolError,
                      errors.KafkaConnectionError)
    assert isinstance(last_error(closes), (errors.KafkaProtocolError, errors.KafkaConnectionError,
                                      errors.RequestTimedOutError))
    assert rss() - before < 64 * MIB


def test_silence(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.silence)
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.RequestTimedOutError)
    assert isinstance(last_error(closes), errors.RequestTimedOutError)
    returns_within(lambda: p.close(timeout=2), 2)


def test_drip_feed_within_request_timeout_delivers(hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.drip(1))
    assert all(f.succeeded() for f in futures), failures(futures)


def test_drip_feed_past_request_timeout(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.drip(200))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.RequestTimedOutError)
    assert isinstance(last_error(closes), errors.RequestTimedOutError)


def test_slow_answers_within_request_timeout_deliver(hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.slow(300))
    assert all(f.succeeded() for f in futures), failures(futures)


def test_slow_answers_past_request_timeout(hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.slow(1500))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.RequestTimedOutError)


def test_unsolicited_response_before_the_answer(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.unsolicited(before=True))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.CorrelationIdError)
    assert isinstance(last_error(closes), errors.CorrelationIdError)


def test_unsolicited_response_after_the_answer(closes, hostile_broker, producer):
    """The answer counts; the frame after it answers nothing and closes the connection."""
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.unsolicited(count=2))
    assert all(f.succeeded() for f in futures), failures(futures)
    deadline = time.monotonic() + BOUND
    while last_error(closes) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(last_error(closes), errors.CorrelationIdError)


def test_reset_mid_frame(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.reset(0.5))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaConnectionError)
    assert isinstance(last_error(closes), errors.KafkaConnectionError)


def test_close_instead_of_answer(closes, hostile_broker, producer):
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.close)
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaConnectionError)
    assert isinstance(last_error(closes), errors.KafkaConnectionError)


def test_malformed_produce_response(hostile_broker, producer):
    """A Produce answer whose body does not decode: typed errors, the batches complete."""
    p, futures = misbehave_on_produce(hostile_broker, producer,
                                      hb.body(b"\x00\x00\x00\x07\xff\xff\xff"))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.KafkaProtocolError)


def test_partition_errors_forever(hostile_broker, producer):
    """Every Produce answered NOT_LEADER_OR_FOLLOWER: retried until the delivery timeout."""
    p, futures = misbehave_on_produce(hostile_broker, producer,
                                      hb.answer_error(errors.NotLeaderForPartitionError.errno))
    assert_all_failed(futures, errors.KafkaTimeoutError, errors.NotLeaderForPartitionError)


def test_unknown_partition_error_code(hostile_broker, producer):
    """An error code pyprod does not know fails the batches at once, typed."""
    p, futures = misbehave_on_produce(hostile_broker, producer, hb.answer_error(9999))
    assert_all_failed(futures, errors.KafkaError)
    assert all(type(e) is not errors.KafkaTimeoutError for e in failures(futures))


@pytest.mark.parametrize("action", [hb.silence, hb.answer_error(9999),
                                    hb.answer_error(errors.ClusterAuthorizationFailedError.errno),
                                    hb.body(b"\x00")],
                         ids=["silence", "unknown-error", "cluster-authorization", "malformed"])
def test_init_producer_id_misbehaves(hostile_broker, producer, action):
    """No producer id to be had (the idempotent producer needs one before any Produce): every
    future still completes by the deadline, typed."""
    broker = hostile_broker(topics={TOPIC: 2})
    broker.on(init_producer_id.API_KEY, action)
    p = producer(broker.bootstrap_servers)
    start = time.monotonic()
    try:
        futures = send_some(p)
    except errors.KafkaError as e:  # the error became fatal first: send() raises it, typed
        assert not isinstance(e, errors.IllegalStateError), e
        futures = []
    wait_done(futures, start)
    assert_all_failed(futures, errors.KafkaError)
    assert not any(isinstance(e, errors.IllegalStateError) for e in failures(futures))
    returns_within(lambda: p.close(timeout=2), 2)


# -- brokers without the Produce versions pyprod needs --------------------------------------------

@pytest.mark.parametrize("ranges", [
    {k: v for k, v in hb.DEFAULT_RANGES.items() if k != produce.API_KEY},
    {**hb.DEFAULT_RANGES, produce.API_KEY: (0, 2)},
], ids=["no-produce", "produce-v0-v2"])
def test_broker_without_produce_v3(hostile_broker, producer, ranges):
    broker = hostile_broker(topics={TOPIC: 2}, ranges=ranges)
    p = producer(broker.bootstrap_servers)
    start = time.monotonic()
    futures = send_some(p)
    wait_done(futures, start)
    assert_all_failed(futures, errors.IncompatibleBrokerVersion)
    returns_within(lambda: p.close(timeout=2), 2)


# -- connecting and ApiVersions -------------------------------------------------------------------

def test_close_on_accept(hostile_broker):
    broker = hostile_broker()
    broker.on_accept(hb.close)
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.KafkaConnectionError)
    e = bootstrap_fails(broker)
    assert broker.bootstrap_servers in str(e), e


def test_reset_on_accept(hostile_broker):
    broker = hostile_broker()
    broker.on_accept(hb.reset(0))
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.KafkaConnectionError)
    bootstrap_fails(broker)


def test_junk_on_accept(hostile_broker):
    before = rss()
    broker = hostile_broker()
    broker.on_accept(hb.junk(seed=3))
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      (errors.KafkaProtocolError, errors.KafkaConnectionError))
    bootstrap_fails(broker)
    assert rss() - before < 64 * MIB


def test_silent_api_versions(hostile_broker):
    broker = hostile_broker()
    broker.on(api_versions.API_KEY, hb.silence)
    err = first_connection_error(broker.bootstrap_servers)
    assert isinstance(err, errors.KafkaConnectionError) and "timed out" in str(err), err
    e = bootstrap_fails(broker)
    assert "checking api versions" in str(e), e


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x7f\xff\xff\xff",
                                  b"\x00\x00\x00\x00\x00\x01\x00\x12"],
                         ids=["empty", "one-byte", "huge-array", "truncated-entry"])
def test_malformed_api_versions(hostile_broker, data):
    broker = hostile_broker()
    broker.on(api_versions.API_KEY, hb.body(data))
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.KafkaProtocolError)
    bootstrap_fails(broker)


@pytest.mark.parametrize("code", [errors.UnsupportedVersionError.errno, 1, 9999, -1])
def test_api_versions_error_code(hostile_broker, code):
    """ApiVersions refused (UNSUPPORTED_VERSION even at v0, other and unknown codes)."""
    broker = hostile_broker()
    broker.on(api_versions.API_KEY, hb.answer_error(code))
    assert isinstance(first_connection_error(broker.bootstrap_servers), errors.KafkaError)
    bootstrap_fails(broker, errors.UnsupportedVersionError if code == 35 else
                    errors.NoBrokersAvailable)


@pytest.mark.parametrize("theirs", [(0, -1), (5, 2), (-3, -3)])
def test_api_versions_absurd_own_range(hostile_broker, theirs):
    """UNSUPPORTED_VERSION naming an absurd ApiVersions range: a typed failure, no crash."""
    broker = hostile_broker(ranges={api_versions.API_KEY: theirs})
    broker.on(api_versions.API_KEY, hb.answer_error(errors.UnsupportedVersionError.errno))
    assert isinstance(first_connection_error(broker.bootstrap_servers), errors.KafkaError)
    bootstrap_fails(broker, errors.UnsupportedVersionError)


def test_api_versions_without_metadata(hostile_broker):
    broker = hostile_broker(ranges={api_versions.API_KEY: (0, 3), produce.API_KEY: (3, 9)})
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.IncompatibleBrokerVersion)
    bootstrap_fails(broker, errors.IncompatibleBrokerVersion)


def test_api_versions_unsolicited_on_accept(hostile_broker):
    """A frame before any request was sent."""
    broker = hostile_broker()
    broker.on_accept(hb.unsolicited())
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.CorrelationIdError)


# -- metadata from a hostile broker ---------------------------------------------------------------

def _leader_at(host, port=None):
    """Metadata naming the hostile broker as node 2 (it answers metadata) and node 1 at
    host:port as the leader of every partition."""
    def provide(broker, topics):
        brokers = [{"node_id": 1, "host": host, "port": broker.port if port is None else port,
                    "rack": None},
                   {"node_id": 2, "host": "127.0.0.1", "port": broker.port, "rack": None}]
        return brokers, [{"error_code": 0, "name": t, "is_internal": False, "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
             "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]} for t in topics]
    return provide


UNREACHABLE = [("unresolvable.invalid", None), ("\u00ff\u00fe.invalid", None),
               ("a" * 64 + ".invalid", None), ("a..b", None), ("", None), ("127.0.0.1", 70000),
               ("127.0.0.1", -1), ("127.0.0.1", 0)]


def test_metadata_names_brokers_that_cannot_be_reached(closes, hostile_broker, producer):
    """The leader named in metadata has a host that cannot be resolved (unresolvable, non-ASCII)
    or encoded (IDNA label too long or empty), or a port out of range: connection failures with
    backoff, and the futures fail by the deadline. One producer per case, all at once."""
    cases = []
    start = time.monotonic()
    for host, port in UNREACHABLE:
        p = producer(hostile_broker(metadata=_leader_at(host, port)).bootstrap_servers)
        cases.append((host, port, p, send_some(p)))
    for host, port, p, futures in cases:
        wait_done(futures, start)
        assert_all_failed(futures, errors.KafkaTimeoutError)
    node_errors = [e for n, e in closes if n == 1]
    assert node_errors and all(isinstance(e, errors.KafkaConnectionError)
                               for e in node_errors), node_errors[:3]
    for host, port, p, futures in cases:
        returns_within(lambda: p.close(timeout=2), 2)


def test_metadata_host_not_utf8(hostile_broker, producer):
    """A metadata answer with a host that is not UTF-8: KafkaProtocolError on the connection;
    send() gives up after max_block_ms."""
    broker = hostile_broker(metadata=_leader_at(b"\xff\xfe\xc3bad-utf8"))
    assert isinstance(first_connection_error(broker.bootstrap_servers),
                      errors.KafkaProtocolError)
    e = bootstrap_fails(broker)
    assert "no broker answered a metadata request" in str(e)
    p = producer(broker.bootstrap_servers, api_version=(2, 8, 0), max_block_ms=1000)
    raises_within(errors.KafkaTimeoutError, lambda: p.send(TOPIC, b"v"), 1)


def test_metadata_partition_indexes_out_of_range(hostile_broker, producer):
    """Partition indexes outside 0..n-1 (negative, 2^31-1, a gap) are not partitions: send()
    raises nothing untyped, and every record goes to a real partition."""
    def provide(broker, topics):
        brokers = [{"node_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
        return brokers, [{"error_code": 0, "name": t, "is_internal": False, "partitions": [
            {"error_code": 0, "partition_index": i, "leader_id": 1, "leader_epoch": 0,
             "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
            for i in (0, -5, 1, 9, 2**31 - 1, 0)]} for t in topics]
    broker = hostile_broker(metadata=provide)
    p = producer(broker.bootstrap_servers)
    assert p.partitions_for(TOPIC) == {0, 1}
    start = time.monotonic()
    futures = send_some(p, n=20)
    wait_done(futures, start)
    assert all(f.succeeded() for f in futures), failures(futures)
    assert {f.value.partition for f in futures[:-1]} <= {0, 1}


def test_random_metadata(hostile_broker, producer):
    """Random node ids, leaders, epochs, partitions and hosts on every metadata answer:
    leaders move forever. Every future completes by the deadline, typed. Three seeds at once."""
    producers, futures = [], []
    start = time.monotonic()
    for seed in (1, 2, 3):
        broker = hostile_broker(metadata=hb.random_metadata(seed))
        producers.append(producer(broker.bootstrap_servers, api_version=(2, 8, 0),
                                  max_block_ms=1000))
    for _ in range(3):
        for p in producers:
            try:
                futures.extend(send_some(p))
            except errors.KafkaTimeoutError:
                pass  # no metadata for the topic within max_block_ms: also typed, also bounded
    wait_done(futures, start, BOUND + 9)  # + the three max_block_ms the sends may have taken
    bad = [e for e in failures(futures) if not isinstance(e, errors.KafkaError)]
    assert not bad, bad
    for p in producers:
        returns_within(lambda: p.close(timeout=2), 2)


# -- bounded waits --------------------------------------------------------------------------------

def test_bootstrap_bounded_by_api_version_auto_timeout(hostile_broker):
    """kafka-python bounds the constructor's wait by api_version_auto_timeout_ms."""
    broker = hostile_broker()
    broker.on(api_versions.API_KEY, hb.silence)
    raises_within(errors.NoBrokersAvailable, lambda: KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, api_version_auto_timeout_ms=1000), 2.0)


def test_send_bounded_by_max_block_ms(hostile_broker, producer):
    broker = hostile_broker()
    broker.on(metadata_api.API_KEY, hb.silence)
    p = producer(broker.bootstrap_servers, api_version=(2, 8, 0), max_block_ms=800)
    raises_within(errors.KafkaTimeoutError, lambda: p.send(TOPIC, b"v"), 0.8)
    raises_within(errors.KafkaTimeoutError, lambda: p.send_batch(TOPIC, [b"a", b"b"]), 0.8)


def test_close_timeout_with_requests_in_flight(hostile_broker, producer):
    """close(timeout) returns by its timeout while the broker sits on every Produce; the
    futures are done then."""
    broker = hostile_broker(topics={TOPIC: 2})
    broker.on(produce.API_KEY, hb.silence)
    p = producer(broker.bootstrap_servers, delivery_timeout_ms=60_000, request_timeout_ms=30_000)
    futures = send_some(p)
    time.sleep(0.3)  # the requests are out
    with pytest.raises(errors.KafkaTimeoutError):
        p.flush(timeout=0.5)
    returns_within(lambda: p.close(timeout=1), 1)
    assert all(f.is_done for f in futures)
    assert_all_failed(futures, errors.KafkaError)


# -- a real broker beside a hostile one -----------------------------------------------------------

HOSTILE_NODE = 1000


def _with_hostile_leader(topic, proxy, hostile):
    """rewrite_metadata: every real broker is reached through ``proxy``, and node HOSTILE_NODE
    (``hostile``) leads partition 0 of ``topic``."""
    def rewrite(resp):
        brokers = [b._replace(host="127.0.0.1", port=proxy.port) for b in resp.brokers]
        brokers.append(brokers[0]._replace(node_id=HOSTILE_NODE, port=hostile.port))
        topics = [t._replace(partitions=tuple(
            p._replace(leader_id=HOSTILE_NODE) if p.partition_index == 0 else p
            for p in t.partitions)) if t.name == topic else t for t in resp.topics]
        return resp._replace(brokers=brokers, topics=topics)
    return rewrite


@pytest.mark.parametrize("action", [hb.silence, hb.junk(seed=5), hb.reset(0)],
                         ids=["silence", "junk", "reset"])
def test_real_broker_keeps_going_beside_a_hostile_leader(kafka, topic, hostile_broker, producer,
                                                         action):
    """Metadata names an extra node, the hostile broker, as the leader of partition 0: its
    records fail typed by the deadline while the real broker takes every other record, before,
    during and after."""
    name = topic(partitions=3)
    proxy = hostile_broker(upstream=kafka.bootstrap_servers)
    hostile = hostile_broker(upstream=kafka.bootstrap_servers, node_id=HOSTILE_NODE)
    proxy.rewrite_metadata = hostile.rewrite_metadata = _with_hostile_leader(name, proxy,
                                                                             hostile)
    hostile.on(produce.API_KEY, action)
    p = producer(proxy.bootstrap_servers)
    p.send(name, b"warm", partition=1).get(30)  # a loaded broker's first answer can be slow
    start = time.monotonic()
    bad = [p.send(name, b"bad%d" % i, partition=0) for i in range(3)]
    good = [p.send(name, b"good%d" % i, partition=1 + i % 2) for i in range(20)]
    wait_done(bad + good, start)
    assert all(f.succeeded() for f in good), failures(good)
    assert hostile.requests_of(produce.API_KEY), "partition 0 never went to the hostile leader"
    assert_all_failed(bad, errors.KafkaTimeoutError, errors.KafkaConnectionError,
                      errors.KafkaProtocolError, errors.RequestTimedOutError)
    more = [p.send(name, b"after%d" % i, partition=1 + i % 2) for i in range(20)]
    wait_done(more, time.monotonic())
    assert all(f.succeeded() for f in more), failures(more)
    offsets = [(f.value.partition, f.value.offset) for f in good + more]
    assert len(set(offsets)) == len(offsets)
    returns_within(lambda: p.close(timeout=2), 2)


def test_real_broker_beside_a_hostile_bootstrap_server(kafka, topic, hostile_broker, producer):
    """The first bootstrap server streams junk at whoever connects: the producer bootstraps from
    the real one and delivers everything."""
    name = topic(partitions=2)
    hostile = hostile_broker()
    hostile.on_accept(hb.junk(seed=9))
    p = producer([hostile.bootstrap_servers, kafka.bootstrap_servers],
                 delivery_timeout_ms=30_000, max_block_ms=30_000, bootstrap_timeout_ms=30_000,
                 api_version_auto_timeout_ms=30_000)
    start = time.monotonic()
    futures = send_some(p, name, n=50)
    wait_done(futures, start, 30)
    assert all(f.succeeded() for f in futures), failures(futures)
