"""NetworkClient against real brokers (Apache Kafka, tansu, librdkafka's mock cluster).

Tiny fake servers on 127.0.0.1 are used only for malformed network input a real broker never
sends (bogus frame sizes, wrong correlation ids) and for byte-by-byte delivery. Every wait is
bounded; nothing asserts on speed.
"""
import contextlib
import os
import signal
import socket
import struct
import threading
import time
import tracemalloc

import pytest

import kcore
from pyprod import config as pconfig
from pyprod import errors
from pyprod.connection import DISCONNECTED, MAX_DELAY_MS, READY, ExponentialBackoff
from kcore import now_ms
from pyprod.producer import metadata_for, network_client_for
from pyprod.protocol import api_versions, header, produce
from pyprod.protocol import metadata as metadata_api
from pyprod.local_broker.processes import free_ports
from tests.harness.kafka_cluster import stop_process

WAIT = 20.0  # upper bound (s) on any wait; tests normally finish far sooner


@contextlib.contextmanager
def make_client(bootstrap, **kw):
    cfg = pconfig.build(bootstrap_servers=bootstrap, **kw)
    md = metadata_for(cfg)
    nc = network_client_for(cfg, md)
    try:
        yield nc, md
    finally:
        nc.network_poll.shutdown()
        md.close()


def poll_until(nc, cond, what, timeout=WAIT, poll_ms=50):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail("timed out after %.0fs waiting for %s" % (timeout, what))
        nc.network_poll.poll(poll_ms)


def bootstrap(nc, md, *topics):
    for t in topics:
        md.add_topic(t)
    poll_until(nc, lambda: md.version > 0, "first metadata")


def wait_ready(nc, node):
    poll_until(nc, lambda: nc.ready(node, now_ms()), "node %s READY" % node)


def first_node(md):
    return sorted(md.cluster.node_ids())[0]


def request(nc, node, api_key, version, body, **kw):
    """send() and poll until the callback ran; returns the ClientResponse."""
    got = []
    nc.send(node, api_key, version, body, callback=got.append, **kw)
    poll_until(nc, lambda: got, "response to api %d" % api_key)
    assert len(got) == 1
    return got[0]


def record_batch(key=b"k", value=b"v"):
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    b.append(timestamp=None, key=key, value=value, headers=[])
    b.close()
    return bytes(b.buffer())


def broker_pid(broker):
    procs = getattr(broker, "_procs", None)
    return procs[0].pid if procs else broker._proc.pid


def port_of(bootstrap_servers):
    return int(bootstrap_servers.split(",")[0].rsplit(":", 1)[1])


# ------------------------------------------------------------------------------------------------
# Apache Kafka
# ------------------------------------------------------------------------------------------------

class TestKafka:
    def test_bootstrap_and_api_versions(self, kafka):
        with make_client(kafka.bootstrap_servers) as (nc, md):
            assert not nc.bootstrap_connected()
            assert md.cluster.is_bootstrap and md.cluster.node_ids() == [-1]
            bootstrap(nc, md)
            assert nc.bootstrap_connected()
            assert not md.cluster.is_bootstrap
            node = first_node(md)
            assert node >= 0
            b = md.cluster.broker_metadata(node)
            assert (b.host, b.port) == ("127.0.0.1", port_of(kafka.bootstrap_servers))
            wait_ready(nc, node)
            assert nc.connection_state(node) == READY
            assert node in nc.connected_nodes()
            assert nc.api_version(node, produce.API_KEY) >= 3
            assert nc.api_version(node, metadata_api.API_KEY) >= 1
            ranges = nc.broker_api_versions(node)
            assert ranges[api_versions.API_KEY][1] >= 3
            assert nc.connection(node).api_versions == ranges
            # the bootstrap connection is dropped once real metadata arrived
            assert nc.connection(-1) is None

    def test_metadata_for_created_topic(self, kafka, topic):
        name = topic(partitions=3)
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md, name)
            c = md.cluster
            assert c.partitions_for_topic(name) == {0, 1, 2}
            assert c.available_partitions_for_topic(name) == {0, 1, 2}
            assert c.partition_count(name) == 3
            assert c.cluster_id == kafka.cluster_id
            assert name in c.topics() and not c.topic_errors
            for p in range(3):
                leader = c.leader_for_partition((name, p))
                assert leader in c.node_ids()
                if hasattr(kafka, "leader_of"):
                    assert leader == kafka.leader_of(name, p)
                info = c.partition_info((name, p))
                assert info.leader_epoch >= 0 and leader in info.replicas and leader in info.isr

    def test_unknown_topic_without_auto_create(self, kafka):
        name = "pyprod-missing-%d" % os.getpid()
        with make_client(kafka.bootstrap_servers, allow_auto_create_topics=False) as (nc, md):
            bootstrap(nc, md, name)
            assert md.cluster.topic_errors[name] is errors.UnknownTopicOrPartitionError
            assert md.cluster.partitions_for_topic(name) is None
            assert md.update_requested()  # keeps asking (after the backoff) until max_block_ms
            v = md.version
            poll_until(nc, lambda: md.version > v, "a metadata retry")
            assert md.cluster.topic_errors[name] is errors.UnknownTopicOrPartitionError

    def test_version_bumps_on_request_update(self, kafka):
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            assert not md.update_requested()
            assert md.time_to_next_update(now_ms()) > 0
            v = md.request_update()
            poll_until(nc, lambda: md.version > v, "update after request_update")
            assert md.version == v + 1 and not md.update_requested()

    def test_refresh_after_max_age(self, kafka):
        with make_client(kafka.bootstrap_servers, metadata_max_age_ms=200) as (nc, md):
            bootstrap(nc, md)
            assert 0 < md.time_to_next_update(now_ms()) <= 200
            v = md.version
            poll_until(nc, lambda: md.version >= v + 2, "two refreshes by metadata_max_age_ms")
            assert not md.update_requested()

    def test_await_update_from_another_thread(self, kafka, topic):
        """A caller thread waits in await_update while this thread (the Sender) polls."""
        name = topic(partitions=2)
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            result = {}

            def caller():
                md.add_topic(name)
                v = md.request_update()
                nc.network_poll.wakeup()
                result["ok"] = md.await_update(v, int(WAIT * 1000))
                result["parts"] = md.cluster.partitions_for_topic(name)

            t = threading.Thread(target=caller)
            t.start()
            poll_until(nc, lambda: not t.is_alive(), "caller thread")
            t.join()
            assert result == {"ok": True, "parts": {0, 1}}

    def test_wakeup_interrupts_poll(self, kafka):
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            done = threading.Event()

            def poller():
                nc.network_poll.poll(60_000)
                done.set()

            t = threading.Thread(target=poller, daemon=True)
            t.start()
            time.sleep(0.05)
            nc.network_poll.wakeup()
            nc.network_poll.wakeup()  # more wakeups than polls is fine
            assert done.wait(WAIT)
            t.join(WAIT)

    def test_produce_acks1_with_buffer_list_body(self, kafka, topic):
        name = topic(partitions=1)
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md, name)
            node = md.cluster.leader_for_partition((name, 0))
            wait_ready(nc, node)
            v = nc.api_version(node, produce.API_KEY)
            body = b"".join(kcore.encode_produce_body(v, 1, 5000, None,
                                                      [(name, 0, record_batch())]))
            mv = memoryview(body)
            parts = [mv[:7], bytearray(mv[7:20]), mv[20:]]  # sent with sendmsg, not joined
            resp = request(nc, node, produce.API_KEY, v, parts)
            assert resp.error is None and resp.node_id == node
            assert (resp.api_key, resp.api_version) == (produce.API_KEY, v)
            assert resp.latency_ms >= 0
            results, _ = kcore.decode_produce_response(v, resp.body)
            (t, partition, error_code, base_offset, *_), = results
            assert (t, partition, error_code, base_offset) == (name, 0, 0, 0)
            assert nc.network_poll.in_flight_count() == 0

    def test_produce_acks0_completes_on_send(self, kafka, topic):
        from tests.harness.readback import read_all_confluent
        name = topic(partitions=1)
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md, name)
            node = md.cluster.leader_for_partition((name, 0))
            wait_ready(nc, node)
            v = nc.api_version(node, produce.API_KEY)
            body = kcore.encode_produce_body(v, 0, 5000, None,
                                             [(name, 0, record_batch(b"k0", b"v0"))])
            got = []
            nc.send(node, produce.API_KEY, v, body, expects_response=False, callback=got.append)
            poll_until(nc, lambda: got, "acks=0 completion")
            assert got[0].body is None and got[0].error is None
            assert nc.network_poll.in_flight_count(node) == 0
            # the connection stays in sync: a request that does get a response still matches
            mv = nc.api_version(node, metadata_api.API_KEY)
            resp = request(nc, node, metadata_api.API_KEY, mv,
                           metadata_api.encode_request(mv, [name]))
            assert resp.error is None
            assert nc.connection_state(node) == READY
        records = read_all_confluent(kafka.bootstrap_servers, name, expected_count=1,
                                     timeout=WAIT)
        assert [(r.key, r.value) for r in records] == [(b"k0", b"v0")]

    def test_correlation_ids_and_in_flight_limit(self, kafka):
        with make_client(kafka.bootstrap_servers,
                         max_in_flight_requests_per_connection=2) as (nc, md):
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            v = nc.api_version(node, metadata_api.API_KEY)
            body = metadata_api.encode_request(v, [])
            got = []
            c1 = nc.send(node, metadata_api.API_KEY, v, body, callback=got.append)
            c2 = nc.send(node, metadata_api.API_KEY, v, body, callback=got.append)
            assert c2 == c1 + 1
            assert nc.network_poll.in_flight_count(node) == 2
            assert not nc.network_poll.is_ready(node, now_ms()) and not nc.ready(node, now_ms())
            assert nc.connection_delay(node, now_ms()) == MAX_DELAY_MS
            with pytest.raises(errors.IllegalStateError):
                nc.send(node, metadata_api.API_KEY, v, body)
            poll_until(nc, lambda: len(got) == 2, "two responses")
            assert [r.correlation_id for r in got] == [c1, c2]
            assert nc.network_poll.is_ready(node, now_ms())
            assert nc.connection_delay(node, now_ms()) == 0

    def test_send_to_unready_node_and_unknown_api(self, kafka):
        with make_client(kafka.bootstrap_servers) as (nc, md):
            with pytest.raises(errors.IllegalStateError):
                nc.send(-1, metadata_api.API_KEY, 1, b"")
            with pytest.raises(errors.IllegalStateError):
                nc.api_version(-1, produce.API_KEY)
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            with pytest.raises(errors.UnsupportedVersionError):
                nc.api_version(node, 9999)
            with pytest.raises(ValueError):
                nc.send(node, metadata_api.API_KEY, 99, b"")
            with pytest.raises(TypeError):
                nc.send(node, metadata_api.API_KEY, 1, 12345)

    def test_least_loaded_node(self, kafka):
        with make_client(kafka.bootstrap_servers) as (nc, md):
            assert nc.least_loaded_node(now_ms()) == -1  # only the bootstrap node
            bootstrap(nc, md)
            node = first_node(md)
            assert nc.least_loaded_node(now_ms()) == node
            wait_ready(nc, node)
            assert nc.least_loaded_node(now_ms()) == node

    def test_request_timeout_closes_connection(self, kafka):
        """A broker that stops answering (SIGSTOP): the request times out, the connection is
        closed, everything in flight on it fails, and a metadata update is requested."""
        with make_client(kafka.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            v = nc.api_version(node, metadata_api.API_KEY)
            body = metadata_api.encode_request(v, [])
            got = []
            pid = broker_pid(kafka)
            stop_process(pid)  # returns once every thread stopped: nothing can answer now
            try:
                nc.send(node, metadata_api.API_KEY, v, body, callback=got.append,
                        timeout_ms=300)
                nc.send(node, metadata_api.API_KEY, v, body, callback=got.append,
                        timeout_ms=60_000)
                assert not md.update_requested()
                poll_until(nc, lambda: len(got) == 2, "timed-out responses")
            finally:
                os.kill(pid, signal.SIGCONT)
            assert all(isinstance(r.error, errors.RequestTimedOutError) for r in got)
            assert all(r.body is None for r in got)
            assert "timed out" in str(got[0].error)
            assert nc.connection_state(node) == DISCONNECTED
            assert isinstance(nc.connection_error(node), errors.RequestTimedOutError)
            assert nc.network_poll.in_flight_count(node) == 0
            assert md.update_requested()
            # and it recovers
            v0 = md.version
            poll_until(nc, lambda: md.version > v0, "metadata after the broker resumed")
            wait_ready(nc, node)

    def test_idle_connection_closed(self, kafka):
        with make_client(kafka.bootstrap_servers, connections_max_idle_ms=200) as (nc, md):
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            poll_until(nc, lambda: nc.connection_state(node) == DISCONNECTED, "idle close")
            assert nc.connection_error(node) is None and not nc.is_connection_failed(node)
            wait_ready(nc, node)  # reconnects on demand


# ------------------------------------------------------------------------------------------------
# Nothing listening: reconnect backoff
# ------------------------------------------------------------------------------------------------

def test_wrong_port_reconnect_backoff_grows():
    port = free_ports(1)[0]
    with make_client("127.0.0.1:%d" % port, reconnect_backoff_ms=20,
                     reconnect_backoff_max_ms=320) as (nc, md):
        backoffs = []
        seen = 0
        deadline = time.monotonic() + WAIT
        while len(backoffs) < 6:
            assert time.monotonic() < deadline, "no reconnect attempts"
            nc.network_poll.poll(50)
            connection = nc.connection(-1)
            if connection is not None and connection.failed_attempts > seen:
                assert connection.failed_attempts == seen + 1  # at most one attempt per backoff
                seen = connection.failed_attempts
                backoffs.append(connection.setup.reconnect_backoff_ms)
                now = now_ms()
                assert connection.state == DISCONNECTED
                assert nc.is_connection_failed(-1)
                assert isinstance(nc.connection_error(-1), errors.KafkaConnectionError)
                assert 0 <= nc.connection_delay(-1, now) <= connection.setup.reconnect_backoff_ms
                assert not nc.ready(-1, now)
        for k, b in enumerate(backoffs):
            term = 20 * 2 ** min(k, 4)
            assert 0.8 * term - 1 <= b <= min(1.2 * term, 320), (k, backoffs)
        assert backoffs[0] < backoffs[1] < backoffs[2] < backoffs[3] < backoffs[4]
        assert md.version == 0 and not nc.bootstrap_connected()
        assert md.update_requested()


def test_exponential_backoff_bounds():
    import math
    b = ExponentialBackoff(50, 1000, jitter=0.2)
    for attempts in range(12):
        term = 50 * 2 ** min(attempts, math.log2(1000 / 50))
        for _ in range(20):
            assert int(0.8 * term) - 1 <= b.backoff(attempts) <= min(1.2 * term, 1000)
    assert ExponentialBackoff(50, 50).backoff(7) == 50
    assert ExponentialBackoff(0, 0).backoff(3) == 0
    assert ExponentialBackoff(100, 1000, jitter=0).backoff(2) == 400


# ------------------------------------------------------------------------------------------------
# Fake servers: malformed input a real broker never sends
# ------------------------------------------------------------------------------------------------

class FakeBroker:
    """Accepts connections on 127.0.0.1 and runs handler(self, connection) for each, in a thread."""

    def __init__(self, handler):
        self.handler = handler
        self.client_closed = threading.Event()
        self.errors = []
        self._stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def bootstrap(self):
        return "127.0.0.1:%d" % self.port

    def _run(self):
        while not self._stop.is_set():
            try:
                peer, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            peer.settimeout(WAIT)
            try:
                self.handler(self, peer)
            except (OSError, AssertionError) as e:
                self.errors.append(e)
            finally:
                peer.close()

    @staticmethod
    def read_request(peer):
        """(api_key, api_version, correlation_id) of the next request, None at EOF."""
        head = _recv_exact(peer, 4)
        if head is None:
            return None
        size = struct.unpack(">i", head)[0]
        frame = _recv_exact(peer, size)
        return struct.unpack(">hhi", frame[:8])

    def wait_client_close(self, peer):
        try:
            while peer.recv(4096):
                pass
            self.client_closed.set()
        except ConnectionResetError:
            self.client_closed.set()

    def close(self):
        self._stop.set()
        self.sock.close()
        self.thread.join(WAIT)


def _recv_exact(peer, n):
    buf = b""
    while len(buf) < n:
        chunk = peer.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


@contextlib.contextmanager
def fake_broker(handler):
    fb = FakeBroker(handler)
    try:
        yield fb
    finally:
        fb.close()


def api_versions_frame(version, correlation_id, ranges):
    body = api_versions.API.encode_response(version, {
        "error_code": 0, "throttle_time_ms": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, (lo, hi) in ranges.items()]})
    return header.write_response_frame(api_versions.API, version, correlation_id, body)


FAKE_RANGES = {api_versions.API_KEY: (0, 3), metadata_api.API_KEY: (0, 12),
               produce.API_KEY: (3, 9)}


@pytest.mark.parametrize("size", [-5, 0, 3, 1001, 0x7FFFFFFF])
def test_bogus_frame_size_closes_connection(size):
    def handler(fb, peer):
        assert fb.read_request(peer) is not None
        peer.sendall(struct.pack(">i", size) + b"\x00" * 64)
        fb.wait_client_close(peer)

    with fake_broker(handler) as fb, \
            make_client(fb.bootstrap, receive_message_max_bytes=1000,
                        reconnect_backoff_ms=10_000) as (nc, md):
        tracemalloc.start()
        try:
            poll_until(nc, lambda: nc.connection_error(-1) is not None, "connection closed")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        err = nc.connection_error(-1)
        assert isinstance(err, errors.InvalidReceiveError), err
        assert "frame of %d bytes" % size in str(err)
        assert nc.connection_state(-1) == DISCONNECTED
        assert peak < 4 * 1024 * 1024  # nothing sized from the bogus length
        assert fb.client_closed.wait(WAIT)
        assert md.version == 0


def test_correlation_id_mismatch_closes_connection():
    def handler(fb, peer):
        api_key, version, corr = fb.read_request(peer)
        assert api_key == api_versions.API_KEY
        peer.sendall(api_versions_frame(version, corr + 1, FAKE_RANGES))
        fb.wait_client_close(peer)

    with fake_broker(handler) as fb, \
            make_client(fb.bootstrap, reconnect_backoff_ms=10_000) as (nc, md):
        poll_until(nc, lambda: nc.connection_error(-1) is not None, "connection closed")
        err = nc.connection_error(-1)
        assert isinstance(err, errors.CorrelationIdError), err
        assert nc.connection_state(-1) == DISCONNECTED
        assert fb.client_closed.wait(WAIT)
        assert md.update_requested()


def test_correlation_mismatch_after_ready_fails_in_flight():
    """A READY connection answering the wrong request: the pending callbacks get the error."""
    def handler(fb, peer):
        _, version, corr = fb.read_request(peer)
        peer.sendall(api_versions_frame(version, corr, FAKE_RANGES))
        _, _, corr = fb.read_request(peer)  # the metadata request
        peer.sendall(header.write_response_frame(metadata_api.API, 12, corr + 7, b"\x00" * 16))
        fb.wait_client_close(peer)

    with fake_broker(handler) as fb, \
            make_client(fb.bootstrap, reconnect_backoff_ms=10_000) as (nc, md):
        poll_until(nc, lambda: nc.connection_error(-1) is not None, "connection closed")
        assert isinstance(nc.connection_error(-1), errors.CorrelationIdError)
        assert md.version == 0
        assert nc.network_poll.in_flight_count() == 0


def test_responses_delivered_byte_by_byte():
    """Size prefixes and frames split across many reads reassemble: the client bootstraps."""
    port_holder = {}

    def dribble(peer, data):
        for i in range(len(data)):
            peer.sendall(data[i:i + 1])
            if i % 7 == 0:
                time.sleep(0.001)

    def handler(fb, peer):
        _, version, corr = fb.read_request(peer)
        dribble(peer, api_versions_frame(version, corr, FAKE_RANGES))
        api_key, version, corr = fb.read_request(peer)
        assert (api_key, version) == (metadata_api.API_KEY, 12)
        body = metadata_api.API.encode_response(12, {
            "throttle_time_ms": 0, "cluster_id": "fake", "controller_id": 7,
            "brokers": [{"node_id": 7, "host": "127.0.0.1", "port": port_holder["port"],
                         "rack": None}],
            "topics": [{"error_code": 0, "name": "t", "is_internal": False,
                        "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 7,
                                        "leader_epoch": 3, "replica_nodes": [7],
                                        "isr_nodes": [7], "offline_replicas": []}]}]})
        dribble(peer, header.write_response_frame(metadata_api.API, 12, corr, body))
        fb.wait_client_close(peer)

    with fake_broker(handler) as fb, make_client(fb.bootstrap) as (nc, md):
        port_holder["port"] = fb.port
        bootstrap(nc, md, "t")
        assert md.cluster.cluster_id == "fake"
        assert md.cluster.leader_for_partition(("t", 0)) == 7
        assert md.cluster.leader_epoch_for_partition(("t", 0)) == 3
        assert not fb.errors


# ------------------------------------------------------------------------------------------------
# librdkafka mock cluster
# ------------------------------------------------------------------------------------------------

class TestMockCluster:
    def test_api_versions_fallback(self, mock_cluster):
        """The mock supports ApiVersions v0..v2 only and answers our v3 with
        UNSUPPORTED_VERSION: the client retries with v0 and negotiates from that."""
        mock_cluster.topic_create("m", 4, 1)
        mock_cluster.start_request_tracking()
        with make_client(mock_cluster.bootstrap_servers) as (nc, md):
            bootstrap(nc, md, "m")
            assert sorted(md.cluster.node_ids()) == [1, 2, 3]
            assert md.cluster.partitions_for_topic("m") == {0, 1, 2, 3}
            node = md.cluster.leader_for_partition(("m", 0))
            wait_ready(nc, node)
            assert nc.broker_api_versions(node)[api_versions.API_KEY][1] < 3
            assert nc.api_version(node, produce.API_KEY) >= 3
        reqs = mock_cluster.get_requests()
        per_broker = {}
        for broker_id, api_key, _ in reqs:
            if api_key == api_versions.API_KEY:
                per_broker[broker_id] = per_broker.get(broker_id, 0) + 1
        assert per_broker and all(n >= 2 for n in per_broker.values()), reqs

    def test_produce_version_too_old(self, mock_cluster):
        mock_cluster.set_apiversion(produce.API_KEY, 0, 2)
        with make_client(mock_cluster.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            with pytest.raises(errors.UnsupportedVersionError):
                nc.api_version(node, produce.API_KEY)

    def test_broker_down_and_up(self, mock_cluster):
        mock_cluster.topic_create("m", 3, 1)
        with make_client(mock_cluster.bootstrap_servers, reconnect_backoff_ms=20,
                         reconnect_backoff_max_ms=200) as (nc, md):
            bootstrap(nc, md, "m")
            for node in (1, 2, 3):
                wait_ready(nc, node)
            assert sorted(nc.connected_nodes()) == [1, 2, 3]
            v = md.version
            mock_cluster.broker_set_down(2)
            poll_until(nc, lambda: nc.connection_state(2) == DISCONNECTED, "node 2 to drop")
            assert isinstance(nc.connection_error(2), errors.KafkaConnectionError)
            assert md.update_requested() or md.version > v
            poll_until(nc, lambda: not nc.ready(2, now_ms()) and
                       nc.connection(2).failed_attempts >= 3, "reconnect attempts to down broker")
            assert nc.least_loaded_node(now_ms()) in (1, 3, 2)
            mock_cluster.broker_set_up(2)
            wait_ready(nc, 2)
            assert nc.connection(2).failed_attempts == 0
            assert sorted(nc.connected_nodes()) == [1, 2, 3]

    def test_rtt_above_request_timeout(self, mock_cluster):
        with make_client(mock_cluster.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            node = first_node(md)
            wait_ready(nc, node)
            v = nc.api_version(node, metadata_api.API_KEY)
            mock_cluster.broker_set_rtt(node, 300)
            resp = request(nc, node, metadata_api.API_KEY, v,
                           metadata_api.encode_request(v, []), timeout_ms=100)
            assert isinstance(resp.error, errors.RequestTimedOutError)
            assert nc.connection_state(node) == DISCONNECTED
            assert md.update_requested()
            mock_cluster.broker_set_rtt(node, 0)
            wait_ready(nc, node)
            resp = request(nc, node, metadata_api.API_KEY, v, metadata_api.encode_request(v, []))
            assert resp.error is None

    def test_least_loaded_prefers_idle_node(self, mock_cluster):
        with make_client(mock_cluster.bootstrap_servers) as (nc, md):
            bootstrap(nc, md)
            for node in (1, 2, 3):
                wait_ready(nc, node)
            v = nc.api_version(1, metadata_api.API_KEY)
            body = metadata_api.encode_request(v, [])
            for node in (1, 2, 3):
                mock_cluster.broker_set_rtt(node, 1000)
            got = []
            for node, n in ((1, 2), (2, 1), (3, 3)):
                for _ in range(n):
                    nc.send(node, metadata_api.API_KEY, v, body, callback=got.append)
            assert nc.least_loaded_node(now_ms()) == 2
            nc.send(2, metadata_api.API_KEY, v, body, callback=got.append)
            nc.send(2, metadata_api.API_KEY, v, body, callback=got.append)
            assert nc.least_loaded_node(now_ms()) == 1
            for node in (1, 2, 3):
                mock_cluster.broker_set_rtt(node, 0)
            poll_until(nc, lambda: len(got) == 8, "all responses")
            assert all(r.error is None for r in got)


# ------------------------------------------------------------------------------------------------
# tansu
# ------------------------------------------------------------------------------------------------

def test_tansu_bootstrap_and_metadata(tansu):
    name = tansu.create_topic("pyprod-nc-%d" % os.getpid(), partitions=2)
    with make_client(tansu.bootstrap_servers) as (nc, md):
        bootstrap(nc, md, name)
        assert md.cluster.partitions_for_topic(name) == {0, 1}
        node = md.cluster.leader_for_partition((name, 0))
        assert md.cluster.broker_metadata(node).port == tansu.port
        wait_ready(nc, node)
        assert nc.api_version(node, produce.API_KEY) >= 3


# ------------------------------------------------------------------------------------------------
# BrokerConnection buffers over a socketpair (no broker needed for byte plumbing)
# ------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def paired_connection(**cfg):
    from pyprod.connection import BrokerConnection
    a, b = socket.socketpair()
    a.setblocking(False)
    connection = BrokerConnection(1, "127.0.0.1", 1, **cfg)
    connection.use_socket(a)
    try:
        yield connection, b
    finally:
        a.close()
        b.close()


def _frame(payload):
    return struct.pack(">i", len(payload)) + payload


def test_connection_reassembles_frames():
    frames = [b"\x00\x00\x00\x01abc", b"\x00\x00\x00\x02", os.urandom(200_000),
              b"\x00\x00\x00\x03" + b"z" * 70_000]
    wire = b"".join(_frame(f) for f in frames)
    with paired_connection() as (connection, peer):
        got = []
        peer.setblocking(False)
        for cut in (5, 3, 65536 + 11, 1, 131072, len(wire)):  # splits inside sizes and bodies
            chunk, wire = wire[:cut], wire[cut:]
            _send_all_draining(peer, chunk, connection, got)
            got += _read_all(connection)
        got += _read_all(connection)
        assert [bytes(f) for f in got] == frames


def _read_all(connection):
    out = []
    while True:
        frames, err = connection.read(0)
        assert err is None
        out += frames
        if not frames:
            return out


def _send_all_draining(peer, data, connection, got):
    view = memoryview(data)
    while view:
        try:
            n = peer.send(view)
            view = view[n:]
        except BlockingIOError:
            got += _read_all(connection)


def test_connection_writes_buffer_lists_with_partial_sends():
    from kcore import InFlightRequest
    with paired_connection() as (connection, peer):
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        big = os.urandom(1 << 20)
        reqs = []
        expected = b""
        for i, expects in enumerate((True, False, True)):
            parts = [struct.pack(">i", 8 + len(big)), b"hdr%05d" % i, memoryview(big)]
            req = InFlightRequest(i, 0, 3, 0, expects, None, 0, 1000)
            connection.enqueue(req, parts)
            reqs.append(req)
            expected += b"".join(bytes(p) for p in parts)
        received = bytearray()
        done = []
        peer.settimeout(WAIT)
        while connection.wants_write:
            done += connection.write(0)
            received += peer.recv(1 << 16)
        while len(received) < len(expected):
            received += peer.recv(1 << 16)
        assert bytes(received) == expected
        assert done == [reqs[1]]  # the no-response request left the FIFO once written
        assert list(connection.in_flight) == [reqs[0], reqs[2]]
        with pytest.raises(errors.CorrelationIdError):
            connection.complete_next(2)
        assert connection.complete_next(0) is reqs[0]


def test_connection_eof_returns_frames_read_before_it():
    with paired_connection() as (connection, peer):
        peer.sendall(_frame(b"\x00\x00\x00\x09ok"))
        peer.close()
        time.sleep(0.01)
        frames, err = connection.read(0)
        assert [bytes(f) for f in frames] == [b"\x00\x00\x00\x09ok"]
        if err is None:
            frames, err = connection.read(0)
        assert isinstance(err, errors.KafkaConnectionError)
        assert "closed by the broker" in str(err)


def test_answers_to_requests_that_expected_none_are_skipped():
    """acks=0 gets no answer from Kafka; a broker that answers anyway (seen from tansu) must
    not be taken for a correlation mismatch that drops the connection."""
    from kcore import InFlightRequest

    with paired_connection() as (connection, _):
        connection.unanswered.append(7)  # request 7 (acks=0) was written
        connection.in_flight.append(InFlightRequest(8, 0, 9, 1, True, None, 0, 1000))
        assert connection.complete_next(7) is None  # the stray answer is skipped
        assert connection.complete_next(8).correlation_id == 8
        with pytest.raises(errors.CorrelationIdError):
            connection.complete_next(7)  # ... once only
