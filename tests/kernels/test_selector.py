"""kcore.selector: readiness and non-blocking socket I/O, on both implementations."""
import selectors
import socket
import sys
import threading

import pytest

R, W = selectors.EVENT_READ, selectors.EVENT_WRITE


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def test_register_select_modify_unregister(k, pair):
    a, b = pair
    sel = k.Selector()
    key = sel.register(a, R, "data")
    assert (key.fileobj, key.fd, key.events, key.data) == (a, a.fileno(), R, "data")
    assert sel.select(0) == []
    b.send(b"x")
    [(key, mask)] = sel.select(1)
    assert (key.data, mask) == ("data", R)
    sel.modify(a, R | W, "both")
    [(key, mask)] = sel.select(0)
    assert (key.data, mask) == ("both", R | W)
    sel.unregister(a)
    assert sel.select(0) == []
    sel.close()


def test_errors(k, pair):
    a, _ = pair
    sel = k.Selector()
    sel.register(a, R)
    with pytest.raises(KeyError):
        sel.register(a, R)
    with pytest.raises(KeyError):
        sel.modify(socket.socket(), R)
    with pytest.raises(ValueError):
        sel.register(-1, R)
    with pytest.raises(ValueError):
        sel.register(socket.socket(), 0)
    sel.unregister(a)
    with pytest.raises(KeyError):
        sel.unregister(a)


def test_select_waits_until_ready(k, pair):
    a, b = pair
    sel = k.Selector()
    sel.register(a, R)
    timer = threading.Timer(0.05, b.send, (b"late",))
    timer.start()
    try:
        events = sel.select(10)  # returns once the byte arrives, not after 10 s
    finally:
        timer.join()
    assert [m for _, m in events] == [R]


def test_hangup_is_readable(k, pair):
    a, b = pair
    sel = k.Selector()
    sel.register(a, R)
    b.close()
    [(_, mask)] = sel.select(1)
    assert mask == R
    assert k.recv_into(a, bytearray(8)) == 0  # EOF


def test_send_buffers_and_recv_into(k, pair):
    a, b = pair
    parts = [b"head", bytearray(b"-mid-"), memoryview(b"xxtailxx")[2:6]]
    assert k.send_buffers(a, parts) == 13
    buf = bytearray(64)
    n = k.recv_into(b, buf)
    assert bytes(buf[:n]) == b"head-mid-tail"
    assert k.send_buffers(a, []) == 0


def test_at_most_max_iov_buffers(k, pair):
    a, b = pair
    assert k.send_buffers(a, [b"x"] * (k.MAX_IOV + 10)) == k.MAX_IOV


def test_would_block(k, pair):
    a, b = pair
    with pytest.raises(BlockingIOError):
        k.recv_into(b, bytearray(8))
    chunk = b"\0" * 65536
    with pytest.raises(BlockingIOError):
        for _ in range(10000):  # fill the socket buffer
            k.send_buffers(a, [chunk])


def test_broken_pipe_is_oserror(k, pair):
    a, b = pair
    b.close()
    with pytest.raises(OSError) as e:
        for _ in range(3):
            k.send_buffers(a, [b"x" * 1000])
    assert not isinstance(e.value, BlockingIOError)


def test_bad_arguments(k, pair):
    a, _ = pair
    with pytest.raises(TypeError):
        k.send_buffers(a, [42])
    with pytest.raises(TypeError):
        k.recv_into(a, b"read-only")


def test_closed_socket_is_oserror(k):
    a, b = socket.socketpair()
    a.close()
    b.close()
    with pytest.raises(OSError):
        k.send_buffers(a, [b"x"])
    with pytest.raises(OSError):
        k.recv_into(a, bytearray(8))


def test_select_io_does_the_io_of_attached_channels(k, pair):
    a, b = pair
    sel = k.Selector()
    sel.register(a, R | W, "conn")
    ch = k.Channel(1 << 20, "node 1")
    sel.set_channel(a, ch)
    ch.enqueue("req", [b"\x00\x00\x00\x04ping"])
    events = sel.select_io(0)
    assert [(key.data, mask) for key, mask in events] == [("conn", W)]
    assert ch.take_written() == ([], 0) and ch.wants_write   # not attached: nothing done
    ch.attach(a)
    b.sendall(b"\x00\x00\x00\x04pong")
    events = sel.select_io(1)
    assert [(key.data, mask) for key, mask in events] == [("conn", R | W)]
    assert ch.take_written() == (["req"], 0)
    frames = []
    assert ch.take_received(frames) == (8, False, 0) and frames == [b"pong"]
    assert b.recv(100) == b"\x00\x00\x00\x04ping"
    sel.unregister(a)   # forgets the channel too
    sel.register(a, R, "again")
    b.sendall(b"\x00\x00\x00\x04more")
    assert [key.data for key, _ in sel.select_io(1)] == ["again"]
    assert ch.take_received(frames) == (0, False, 0)
    with pytest.raises(KeyError):
        sel.set_channel(b, ch)
    sel.close()


@pytest.mark.parametrize("timeout", [0, 0.0005, 0.01])
def test_select_leaves_the_switch_interval_as_it_was(k, pair, timeout):
    """kcore.gil_handback around select's GIL-free section (a short poll: 100 us inside it):
    the interval set before is the one after, whatever the wait."""
    a, b = pair
    sel = k.Selector()
    sel.register(a, R | W)
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.003)
    try:
        sel.select_io(timeout)
        sel.modify(a, R)
        assert sel.select(timeout) == []
        assert sys.getswitchinterval() == pytest.approx(0.003)
    finally:
        sys.setswitchinterval(old)
        sel.close()


def _timer_slack_ns():
    """The calling thread's timer slack (prctl PR_GET_TIMERSLACK)."""
    import ctypes
    return ctypes.CDLL(None).prctl(30, 0, 0, 0, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's timer slack")
def test_precise_timers_sets_only_the_calling_threads_timer_slack(k):
    """The Sender's linger: its polls end on time, not up to Linux's default 50 us late."""
    sel, seen = k.Selector(), []
    before = _timer_slack_ns()

    def thread():
        seen.append((sel.precise_timers(), _timer_slack_ns()))

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    sel.close()
    assert seen == [(True, 1)]
    assert _timer_slack_ns() == before  # the calling thread's alone
