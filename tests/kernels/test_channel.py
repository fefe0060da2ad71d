"""kcore.channel: a connection's send queue and receive framing, on both implementations."""
import os
import select
import socket
import struct
import sys

import pytest

from pyprod import errors

MAX = 1 << 20


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def _frame(body):
    return struct.pack(">i", len(body)) + body


def test_frames_are_written_whole_and_in_order_with_partial_writes(k, pair):
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ch = k.Channel(MAX, "node 1")
    big = os.urandom(1 << 20)
    expected = b""
    for i in range(3):
        parts = [struct.pack(">i", 8 + len(big)), b"hdr%05d" % i, memoryview(big), b""]
        ch.enqueue("req%d" % i, parts)
        expected += b"".join(bytes(p) for p in parts)
    ch.enqueue("empty", [])   # a frame with no bytes still completes, in its turn
    received, done = bytearray(), []
    b.setblocking(False)
    while ch.wants_write or len(received) < len(expected):
        if ch.wants_write:
            done += ch.write(a)
        # over TCP (Windows' socketpair) written bytes may wait in a's buffer: wait for either
        readable, writable, _ = select.select([b], [a] if ch.wants_write else [], [], 30)
        assert readable or writable, "neither end moved"
        if readable:
            received += b.recv(1 << 16)
    assert bytes(received) == expected
    assert done == ["req0", "req1", "req2", "empty"]


def test_pending_and_advance_for_a_tls_writer(k):
    ch = k.Channel(MAX, "node 1")
    ch.enqueue(1, [b"abcd", b"", b"efgh"])
    ch.enqueue(2, [bytearray(b"ijkl")])
    assert [bytes(v) for v in ch.pending()] == [b"abcd", b"efgh", b"ijkl"]
    assert [bytes(v) for v in ch.pending(2)] == [b"abcd", b"efgh"]
    assert ch.advance(3) == []
    assert [bytes(v) for v in ch.pending()] == [b"d", b"efgh", b"ijkl"]
    assert ch.advance(5) == [1]
    assert ch.advance(4) == [2] and not ch.wants_write


def test_a_bad_buffer_leaves_the_queue_as_it_was(k):
    ch = k.Channel(MAX, "node 1")
    ch.enqueue(1, [b"ab"])
    with pytest.raises(TypeError):
        ch.enqueue(2, [b"cd", 42])
    assert [bytes(v) for v in ch.pending()] == [b"ab"]
    assert ch.advance(2) == [1] and not ch.wants_write


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 7, 1000])
def test_feed_reassembles_frames_split_anywhere(k, cut):
    bodies = [b"\x00\x00\x00\x01abc", b"\x00\x00\x00\x02", os.urandom(70_000), b"zz\x00\x01"]
    wire = b"".join(_frame(f) for f in bodies)
    ch, frames = k.Channel(MAX, "node 1"), []
    for pos in range(0, len(wire), cut):
        chunk = bytearray(wire[pos:pos + cut]) + b"junk after n"
        ch.feed(chunk, min(cut, len(wire) - pos), frames)
    assert [bytes(f) for f in frames] == bodies


@pytest.mark.parametrize("size", [-1, 0, 3, MAX + 1, -(1 << 31)])
def test_bad_frame_sizes_are_typed_errors(k, size):
    ch, frames = k.Channel(MAX, "node 7 (127.0.0.1:9)"), []
    with pytest.raises(errors.InvalidReceiveError, match=r"node 7 \(127.0.0.1:9\) sent a frame "
                       r"of %d bytes \(valid: 4..%d" % (size, MAX)):
        ch.feed(_frame(b"abcd") + struct.pack(">i", size), 12, frames)
    assert [bytes(f) for f in frames] == [b"abcd"]


def test_feed_checks_its_count(k):
    with pytest.raises(ValueError):
        k.Channel(MAX, "n").feed(b"abc", 4, [])


def test_a_huge_claimed_size_allocates_nothing_up_front(k):
    ch, frames = k.Channel(1 << 30, "node 1"), []
    ch.feed(struct.pack(">i", (1 << 30) - 1) + b"x", 5, frames)
    assert frames == [] and sys.getsizeof(ch) < 1 << 20
    ch.clear()   # the partial frame goes with the connection
    ch.feed(_frame(b"next"), 8, frames)
    assert frames == [b"next"]


def test_read_until_would_block_then_eof(k, pair):
    a, b = pair
    ch, frames = k.Channel(MAX, "node 1"), []
    assert ch.read(a, frames) == (0, False)
    payload = _frame(b"one!") + _frame(os.urandom(200_000))
    b.sendall(payload[:100_000])
    got = 0
    while got < 100_000:
        got += ch.read(a, frames)[0]
    assert [bytes(f) for f in frames] == [b"one!"]
    b.sendall(payload[100_000:])
    b.close()
    eof = False
    while not eof:
        n, eof = ch.read(a, frames, 1)
    assert [bytes(f) for f in frames][1:] == [payload[12:]]


def test_write_to_a_closed_peer_raises_oserror(k, pair):
    a, b = pair
    b.close()
    ch = k.Channel(MAX, "node 1")
    with pytest.raises(OSError):  # at once (AF_UNIX), or once the peer's reset is back (TCP)
        for i in range(100):
            ch.enqueue(i, [b"x" * 100_000])
            ch.write(a)


def test_clear_lets_go_of_buffers_and_tags(k):
    data, tag = bytearray(b"held"), object()
    refs = (sys.getrefcount(data), sys.getrefcount(tag))
    ch = k.Channel(MAX, "node 1")
    ch.enqueue(tag, [data])
    with pytest.raises(BufferError):
        data.extend(b"!")   # exported to the channel until written
    ch.clear()
    assert not ch.wants_write
    assert (sys.getrefcount(data), sys.getrefcount(tag)) == refs
    data.extend(b"!")
    ch.enqueue(tag, [data])
    del ch   # dropping the channel lets go too
    assert (sys.getrefcount(data), sys.getrefcount(tag)) == refs


def test_direct_io_writes_and_reads_for_select_io(k, pair):
    a, b = pair
    ch = k.Channel(MAX, "node 1")
    assert not ch.direct
    ch.attach(a)
    assert ch.direct
    ch.enqueue("r1", [b"\x00\x00\x00\x04", b"ping"])
    ch.io(False, True)
    assert b.recv(100) == b"\x00\x00\x00\x04ping"
    assert ch.take_written() == (["r1"], 0) and not ch.wants_write
    b.sendall(_frame(b"pong") + _frame(b"two!")[:5])
    ch.io(True, False)
    frames = []
    assert ch.take_received(frames) == (13, False, 0)
    assert [bytes(f) for f in frames] == [b"pong"]   # the rest waits for its bytes
    b.sendall(_frame(b"two!")[5:])
    b.close()
    ch.io(True, False)
    assert ch.take_received(frames) == (3, True, 0)
    assert [bytes(f) for f in frames] == [b"pong", b"two!"]
    ch.clear()
    assert not ch.direct


def test_direct_io_errors_wait_for_take(k, pair):
    a, b = pair
    ch = k.Channel(MAX, "node 1")
    ch.attach(a)
    b.close()
    for i in range(100):  # the error at once (AF_UNIX), or once the peer's reset is back (TCP)
        ch.enqueue("r%d" % i, [b"x" * 100_000])
        ch.io(False, True)
    tags, err = ch.take_written()
    assert err != 0 and tags == ["r%d" % i for i in range(len(tags))]
    assert ch.take_written() == ([], 0)


def test_direct_io_bad_frame_size(k, pair):
    a, b = pair
    ch = k.Channel(MAX, "node 1")
    ch.attach(a)
    b.sendall(_frame(b"fine") + struct.pack(">i", 2))
    ch.io(True, False)
    frames = []
    with pytest.raises(errors.InvalidReceiveError):
        ch.take_received(frames)
    assert frames == [b"fine"]


def test_a_write_after_select_io_reports_its_frames_first(k, pair):
    a, b = pair
    ch = k.Channel(MAX, "node 1")
    ch.attach(a)
    ch.enqueue(1, [b"one"])
    ch.io(False, True)
    ch.enqueue(2, [b"two"])
    assert ch.write(a) == [1, 2]
    assert b.recv(10) == b"onetwo"


@pytest.mark.skipif(not getattr(sys, "_is_gil_enabled", lambda: True)(), reason="GIL off")
@pytest.mark.parametrize("interval", [0.002, 0.00005])
def test_a_large_write_gives_the_switch_interval_back(k, pair, interval):
    """kcore.gil_handback: the Sender's GIL-free sections that do not sleep run with a 100 us
    switch interval (it asks the GIL back then, not after 5 ms); after them the interval is the
    one set before; one already shorter is left alone. The pure twin has no such sections."""
    a, b = pair
    old = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        if k.pure is False:
            from kcore.gil_handback import section_intervals
            during, after = section_intervals()
            assert during == pytest.approx(min(interval, 0.0001))
            assert after == pytest.approx(interval)
        ch = k.Channel(MAX, "node 1")
        body = os.urandom(1 << 16)
        ch.enqueue("big", [body])
        got, done = bytearray(), []
        b.setblocking(False)
        while ch.wants_write or len(got) < len(body):
            if ch.wants_write:
                done += ch.write(a)
            select.select([b], [], [], 30)
            got += b.recv(1 << 17)
        assert bytes(got) == body and done == ["big"]
        assert sys.getswitchinterval() == pytest.approx(interval)
    finally:
        sys.setswitchinterval(old)
