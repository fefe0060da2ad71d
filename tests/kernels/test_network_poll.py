"""kcore.network_poll (the NetworkClient's data path) on both implementations, without a
broker: response frames matched to the in-flight FIFO and their headers skipped, requests
framed and written, acks=0 requests completed once written, and SenderLoop.run_once leaving
the producer id's decisions to the Sender. The NetworkClient runs it against real brokers in
tests/network and every integration test."""
import collections
import socket

import pytest

import kcore
from pyprod import errors
from pyprod.network_client import NetworkClient
from test_sender_loop import Rig

V1_HEADER = (b"\x00\x00", b"\x00\x06client\x00", 1)  # (before cid, after cid, response header)


class Conn:
    def __init__(self, k, sock=None):
        self.node_id, self.host, self.port = 1, "127.0.0.1", 9
        self.state = k.READY
        self.in_flight = collections.deque()
        self.unanswered = collections.deque(maxlen=8)
        self.channel = k.Channel(1 << 20, "node 1")
        self.sock = sock
        self.sel_mask = 1
        self.last_activity_ms = 0
        self.tls = None


class Client:
    _response_header_end = NetworkClient._response_header_end

    def __init__(self):
        self._completed, self.closed, self.internal = [], [], []
        self._correlation = 0
        self._heads = {(0, 9): V1_HEADER}
        self._max_in_flight = 5

    def _close(self, conn, error, now, request_update=True):
        self.closed.append(error)

    def _handle_internal(self, conn, req, body, now):
        self.internal.append((req.internal, bytes(body)))


def _request(k, cid, header_version=1, internal=None, expects=True):
    return k.InFlightRequest(cid, 0, 9, header_version, expects, "cb", 0, 1000, internal)


def test_both_twins_have_the_same_functions(both):
    pure, other = (b.network_poll for b in both)
    names = {n for n in vars(pure) if not n.startswith("_") and callable(getattr(pure, n))}
    assert names <= set(dir(other))
    assert {"poll", "enqueue", "handle_frame", "handle_io", "can_send"} <= names


def test_frames_complete_the_fifo_head_past_their_header(k):
    client, conn = Client(), Conn(k)
    conn.in_flight.extend([_request(k, 7, 1), _request(k, 8, 0)])
    k.network_poll.handle_frame(client, conn, b"\x00\x00\x00\x07\x00body7", 5)
    k.network_poll.handle_frame(client, conn, bytearray(b"\x00\x00\x00\x08body8"), 5)
    assert [(cb, bytes(r.body), r.correlation_id) for cb, r in client._completed] == [
        ("cb", b"body7", 7), ("cb", b"body8", 8)]
    assert not conn.in_flight and not client.closed


def test_tagged_fields_in_the_response_header_are_skipped(k):
    client, conn = Client(), Conn(k)
    conn.in_flight.append(_request(k, 3, 1))
    # one tagged field: tag 5, 2 bytes
    k.network_poll.handle_frame(client, conn, b"\x00\x00\x00\x03\x01\x05\x02xyBODY", 0)
    assert bytes(client._completed[0][1].body) == b"BODY"


@pytest.mark.parametrize("frame, error", [
    (b"\x00\x00", errors.KafkaError),                          # no room for a correlation id
    (b"\x00\x00\x00\x04\x00", errors.CorrelationIdError),     # not the FIFO head
    (b"\x00\x00\x00\x03\x05\x01", errors.KafkaError),         # tagged fields cut short
])
def test_bad_frames_close_the_connection_with_a_typed_error(k, frame, error):
    client, conn = Client(), Conn(k)
    conn.in_flight.append(_request(k, 3, 1))
    k.network_poll.handle_frame(client, conn, frame, 0)
    assert len(client.closed) == 1 and isinstance(client.closed[0], error)
    assert not client._completed


def test_answers_to_unanswered_requests_are_skipped_and_internal_ones_go_to_the_client(k):
    client, conn = Client(), Conn(k)
    conn.unanswered.append(2)
    conn.in_flight.append(_request(k, 3, 0, internal="metadata"))
    k.network_poll.handle_frame(client, conn, b"\x00\x00\x00\x02", 0)  # skipped, once
    k.network_poll.handle_frame(client, conn, b"\x00\x00\x00\x03meta", 0)
    assert client.internal == [("metadata", b"meta")] and not client.closed
    k.network_poll.handle_frame(client, conn, b"\x00\x00\x00\x02", 0)
    assert isinstance(client.closed[0], errors.CorrelationIdError)


def test_enqueue_frames_and_writes_the_request(k):
    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        client, conn = Client(), Conn(k, a)
        client._correlation = 0x7FFFFFFF
        cid = k.network_poll.enqueue(client, conn, 0, 9, [b"ab", b"cd"], True, "cb", 1000, 5,
                                     None)
        assert cid == 0x7FFFFFFF and client._correlation == 0  # wraps
        head = V1_HEADER[0] + (0x7FFFFFFF).to_bytes(4, "big") + V1_HEADER[1]
        expected = (len(head) + 4).to_bytes(4, "big") + head + b"abcd"
        assert b.recv(100) == expected
        assert list(conn.in_flight)[0].correlation_id == cid and not client._completed
        # expects no response (acks=0): complete once written, out of the FIFO
        cid = k.network_poll.enqueue(client, conn, 0, 9, b"x", False, "cb0", 1000, 6, None)
        assert cid == 0 and list(conn.unanswered) == [0] and len(conn.in_flight) == 1
        assert [(cb, r.body, r.error) for cb, r in client._completed] == [("cb0", None, None)]
    finally:
        a.close()
        b.close()


def test_run_once_leaves_the_producer_id_to_the_sender(k):
    tm = k.TransactionManager(5)
    rig = Rig(k, tm=tm)
    before = k.network_poll.now_ms()
    now = rig.loop.run_once(None, None, 1 << 20)  # no producer id: no client needed
    assert before <= now <= k.network_poll.now_ms()


def test_active_implementation_is_the_network_clients():
    import pyprod.network_client as nc
    assert nc.network_poll is kcore.network_poll
    assert kcore.network_poll.__name__ == (
        "kcore.network_poll" if kcore.EXTENSIONS else "kcore.pure.network_poll")
