"""kcore's NetworkPoll (the NetworkClient's data path) and BrokerConnection (one connection's)
on both implementations, without a broker: response frames matched to the in-flight FIFO and their
headers skipped, requests framed and written, acks=0 requests completed once written, and
SenderLoop.run_once leaving the producer id's decisions to the Sender. The NetworkClient runs
them against real brokers in tests/network and every integration test."""
import socket
import types

import pytest

import kcore
from pyprod import errors
from pyprod.metadata import Metadata as ClientMetadata
from pyprod.connection_lifecycle import ConnectionLifecycle
from pyprod.network_client import NetworkClient
from test_sender_loop import Rig

V1_HEADER = (b"\x00\x00", b"\x00\x06client\x00", 1)  # (before cid, after cid, response header)


class Hooks:
    """The policy's side of NetworkPoll: records what it is asked to decide."""

    def __init__(self):
        self.closed, self.internal = [], []

    def response_header_end(self, frame):
        return ConnectionLifecycle.response_header_end(self, frame)

    def request_head(self, api_key, version):
        return V1_HEADER

    def connection_closed(self, poll, conn, state, error, failed, now, request_update):
        self.closed.append(error)
        return error

    def handle_internal(self, poll, conn, req, body, now):
        self.internal.append((req.internal, bytes(body)))


class Updater:
    fetch = None


class Metadata:
    update_due_ms = 1 << 62


def _poll(k):
    hooks = Hooks()
    return hooks, k.NetworkPoll(hooks, Metadata(), Updater(), k.Selector(), k.Waker(),
                                max_in_flight=5, request_timeout_ms=1000, idle_ms=60_000)


def _link(k, sock=None):
    conn = k.BrokerConnection(1, "127.0.0.1", 9, k.Channel(1 << 20, "node 1"))
    conn.state, conn.sock, conn.sel_mask = k.READY, sock, 1
    return conn


def _request(k, cid, header_version=1, internal=None, expects=True):
    return k.InFlightRequest(cid, 0, 9, header_version, expects, "cb", 0, 1000, internal)


def test_both_twins_have_the_same_methods(both):
    for name in ("NetworkPoll", "BrokerConnection"):
        pure, other = (getattr(b, name) for b in both)
        names = {n for n in vars(pure) if not n.startswith("__")}
        assert names <= set(dir(other)), name
    assert {"poll", "enqueue", "handle_frame", "handle_io", "can_send"} <= set(
        vars(both[0].NetworkPoll))


def test_frames_complete_the_fifo_head_past_their_header(k):
    (hooks, io), conn = _poll(k), _link(k)
    conn.in_flight.extend([_request(k, 7, 1), _request(k, 8, 0)])
    io.handle_frame(conn, b"\x00\x00\x00\x07\x00body7", 5)
    io.handle_frame(conn, bytearray(b"\x00\x00\x00\x08body8"), 5)
    assert [(cb, bytes(r.body), r.correlation_id) for cb, r in io.completed] == [
        ("cb", b"body7", 7), ("cb", b"body8", 8)]
    assert not conn.in_flight and not hooks.closed


def test_tagged_fields_in_the_response_header_are_skipped(k):
    (hooks, io), conn = _poll(k), _link(k)
    conn.in_flight.append(_request(k, 3, 1))
    # one tagged field: tag 5, 2 bytes
    io.handle_frame(conn, b"\x00\x00\x00\x03\x01\x05\x02xyBODY", 0)
    assert bytes(io.completed[0][1].body) == b"BODY"


@pytest.mark.parametrize("frame, error", [
    (b"\x00\x00", errors.KafkaError),                          # no room for a correlation id
    (b"\x00\x00\x00\x04\x00", errors.CorrelationIdError),     # not the FIFO head
    (b"\x00\x00\x00\x03\x05\x01", errors.KafkaError),         # tagged fields cut short
])
def test_bad_frames_close_the_connection_with_a_typed_error(k, frame, error):
    (hooks, io), conn = _poll(k), _link(k)
    req = _request(k, 3, 1)
    conn.in_flight.append(req)
    io.handle_frame(conn, frame, 0)
    assert len(hooks.closed) == 1 and isinstance(hooks.closed[0], error)
    assert conn.state == k.DISCONNECTED and not conn.in_flight
    assert [(cb, r.error) for cb, r in io.completed] == [("cb", hooks.closed[0])]


def test_answers_to_unanswered_requests_are_skipped_and_internal_ones_go_to_the_client(k):
    (hooks, io), conn = _poll(k), _link(k)
    conn.unanswered.append(2)
    conn.in_flight.append(_request(k, 3, 0, internal="metadata"))
    io.handle_frame(conn, b"\x00\x00\x00\x02", 0)  # skipped, once
    io.handle_frame(conn, b"\x00\x00\x00\x03meta", 0)
    assert hooks.internal == [("metadata", b"meta")] and not hooks.closed
    io.handle_frame(conn, b"\x00\x00\x00\x02", 0)
    assert isinstance(hooks.closed[0], errors.CorrelationIdError)


def test_enqueue_frames_and_writes_the_request(k):
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        (hooks, io), conn = _poll(k), _link(k, a)
        io.correlation = 0x7FFFFFFF
        cid = io.enqueue(conn, 0, 9, [b"ab", b"cd"], True, "cb", 1000, 5, None)
        assert cid == 0x7FFFFFFF and io.correlation == 0  # wraps
        head = V1_HEADER[0] + (0x7FFFFFFF).to_bytes(4, "big") + V1_HEADER[1]
        expected = (len(head) + 4).to_bytes(4, "big") + head + b"abcd"
        assert b.recv(100) == expected
        assert list(conn.in_flight)[0].correlation_id == cid and not io.completed
        # expects no response (acks=0): complete once written, out of the FIFO
        cid = io.enqueue(conn, 0, 9, b"x", False, "cb0", 1000, 6, None)
        assert cid == 0 and list(conn.unanswered) == [0] and len(conn.in_flight) == 1
        assert [(cb, r.body, r.error) for cb, r in io.completed] == [("cb0", None, None)]
    finally:
        a.close()
        b.close()
        io.shutdown()


def test_a_waker_interrupts_the_wait_once(k):
    hooks, io = _poll(k)
    io.wakeup()
    io.wakeup()  # pending already: no second byte
    events = io.sel.select(0)
    assert [key.data for key, _ in events] == [None]
    io.waker.drain()
    assert not io.waker.pending and io.sel.select(0) == []
    io.shutdown()
    io.wakeup()  # closed: nothing to wake, no error


def test_sub_millisecond_waits_end_and_a_wake_still_interrupts_them(k):
    """poll(timeout_ms) takes fractional ms (the Sender's linger left, to the microsecond)."""
    hooks, io = _poll(k)
    for timeout_ms in (0.001, 0.25, 1.5):
        assert io.sel.select_io(timeout_ms / 1000.0) == []
        io.poll(timeout_ms)
    io.wakeup()
    assert [key.data for key, _ in io.sel.select(0.0005)] == [None]
    io.waker.drain()
    before, ms, after = k.NetworkPoll.now_us(), k.NetworkPoll.now_ms(), k.NetworkPoll.now_us()
    assert before // 1000 - 1 <= ms <= after // 1000 + 1  # one clock (float rounding aside)
    io.shutdown()


def test_run_once_leaves_the_producer_id_to_the_sender(k):
    tm = k.TxnPartitionMap(5)
    rig = Rig(k, tm=tm)
    rig.loop.net = types.SimpleNamespace(now_ms=k.NetworkPoll.now_ms,  # the loop's clock
                                         now_us=k.NetworkPoll.now_us)
    before = k.NetworkPoll.now_ms()
    now = rig.loop.run_once(None, None, 1 << 20)  # no producer id: no client needed
    assert before <= now <= k.NetworkPoll.now_ms()


def test_active_implementation_is_the_network_clients():
    metadata = ClientMetadata([("127.0.0.1", 9)], retry_backoff_ms=100,
                              metadata_max_age_ms=1000, metadata_max_idle_ms=1000)
    client = NetworkClient(metadata, client_id="c", request_timeout_ms=1000,
                           max_in_flight_requests_per_connection=5,
                           connections_max_idle_ms=1000, reconnect_backoff_ms=50,
                           reconnect_backoff_max_ms=1000, receive_message_max_bytes=1 << 20)
    try:
        assert type(client.network_poll) is kcore.NetworkPoll
    finally:
        client.network_poll.shutdown()
    assert kcore.NetworkPoll.__module__ == (
        "kcore.network_poll" if kcore.EXTENSIONS else "kcore._network_poll")


def test_send_and_send_batch_wake_the_senders_waker(k):
    """The producer hands SendPath and BatchSendPath the Sender's Waker (woken C to C in the
    compiled twin): a new batch leaves one byte for the Sender's selector, and one only."""
    from pyprod import config
    from pyprod.producer import send_settings
    from test_record_accumulator import FakeMetadata, accumulator
    cfg = config.build(linger_ms=0, batch_size=1024)
    acc = accumulator(k, cfg, FakeMetadata(1))
    waker, sel = k.Waker(), k.Selector()
    sel.register(waker.reader, 1, None)
    try:
        sp = k.SendPath(acc, lambda *a: None, waker, **send_settings(cfg))
        bp = k.BatchSendPath(sp, acc, lambda *a: None, waker, **send_settings(cfg))
        for send in (lambda: sp.send("t", b"v", partition=0),
                     lambda: bp.send("t", [b"v"] * 50, partitions=[0] * 50)):
            assert not waker.pending
            send()
            assert waker.pending and [key.data for key, _ in sel.select(0)] == [None]
            waker.drain()
            assert sel.select(0) == []
    finally:
        sel.close()
        waker.close()
