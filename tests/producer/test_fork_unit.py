"""A KafkaProducer and kcore's locked kernels across os.fork(), without a broker (docs/fork.md):
the child closes its copies of the parent's sockets at once, builds new parts on first use, and
finds every lock usable; the parent goes on unaffected. Both twins: the kernels through ``k``,
the producer through PYPROD_NO_EXTENSIONS=1."""
import errno
import os
import socket
import threading
import time

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.forked import needs_fork, run_forked

pytestmark = needs_fork  # every test here forks


@pytest.fixture
def silent_broker():
    """A 127.0.0.1 listener that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1], accepted
    stop.set()
    t.join(5)
    for s in accepted + [server]:
        s.close()


@pytest.fixture
def producer(silent_broker):
    """Connected to the silent broker (a bootstrap connection open), nothing answered."""
    port, accepted = silent_broker
    p = KafkaProducer(bootstrap_servers="127.0.0.1:%d" % port, api_version=(2, 8),
                      max_block_ms=300, linger_ms=60_000)
    with pytest.raises(errors.KafkaTimeoutError):
        p.send("t", b"no metadata")  # connects, waits for metadata that never comes
    yield p
    p.close(timeout=0)


def _socket_fds(p):
    return [c.sock.fileno() for c in p._client.network_poll.connections.values() if c.sock is not None]


def test_the_child_closes_its_copies_of_the_parents_sockets_at_once(producer):
    fds = _socket_fds(producer) + [producer._client.network_poll.waker.reader.fileno(),
                                   producer._client.network_poll.waker.writer.fileno()]
    assert len(fds) >= 3

    def child():
        for fd in fds:  # closed by the fork hook: nothing written, no shutdown()
            with pytest.raises(OSError) as e:
                os.fstat(fd)
            assert e.value.errno == errno.EBADF

    run_forked(child)
    for fd in fds:  # the parent's are untouched
        os.fstat(fd)
    assert producer._sender.is_alive()


def test_first_use_in_the_child_builds_new_parts(producer):
    before = (producer._sender, producer._accumulator, producer._client, producer._send_path)
    old_send = producer.send

    def child():
        assert not before[0].is_alive()  # the parent's Sender thread does not exist here
        producer.flush()                 # nothing of this process's: returns at once
        with pytest.raises(errors.KafkaTimeoutError):  # the first use: new parts, no broker
            old_send("t", b"child")      # a send bound before the fork reaches them too
        now = (producer._sender, producer._accumulator, producer._client, producer._send_path)
        assert all(a is not b for a, b in zip(before, now))
        assert producer._sender.is_alive() and not producer._accumulator.has_incomplete()
        assert producer._accumulator.pool.available_memory == \
            producer._accumulator.pool.total_memory
        with pytest.raises(errors.KafkaTimeoutError):
            producer.send("t", b"child again")
        producer.close(timeout=0)  # the silent broker holds a request in flight: forced
        producer._sender.join(5)
        assert not producer._sender.is_alive()

    run_forked(child)
    assert producer._sender is before[0] and producer._sender.is_alive()
    assert producer.send.__self__ is before[3]


def test_a_producer_closed_before_the_fork_stays_closed_in_the_child(producer):
    producer.close(timeout=0)
    # the Sender ends before the fork: forking while it freed memory without the GIL hung the
    # child under the sanitizer pass (GCC 12's ASan allocator has no fork handlers, so a lock
    # another thread holds stays held in the child)
    producer._sender.join(30)
    assert not producer._sender.is_alive()

    def child():
        with pytest.raises(errors.IllegalStateError, match="closed"):
            producer.send("t", b"child")
        with pytest.raises(errors.IllegalStateError, match="closed"):
            producer.send_batch("t", [b"child"])

    run_forked(child)


def test_close_in_an_unused_child_leaves_the_parent_alone(producer):
    def child():
        assert producer.metrics()  # the parent's figures as of the fork (its lock is free)
        producer.close()  # nothing of this process's to send: returns at once
        with pytest.raises(errors.IllegalStateError, match="closed"):
            producer.send("t", b"child")

    run_forked(child)
    assert producer._sender.is_alive()
    with pytest.raises(errors.KafkaTimeoutError):
        producer.send("t", b"parent")  # still its own producer, waiting for metadata


def test_pool_waiters_of_the_parent_are_gone_in_the_child_and_the_pool_works(k):
    """A thread waits for memory at the fork: the child's copy has no waiter, and allocates
    and gives back; the parent's waiter is served once memory comes back there."""
    pool = k.BufferPool(8192, 1024)
    held = pool.allocate(8192, 0)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(1024, 10_000)))
    waiter.start()
    while pool.waiters == 0:
        time.sleep(0.001)

    def child():
        assert pool.waiters == 0
        pool.deallocate(held)
        buf = pool.allocate(4096, 0)
        pool.deallocate(buf)
        assert pool.available_memory == 8192

    run_forked(child)
    assert pool.waiters == 1
    pool.deallocate(held)
    waiter.join(10)
    assert len(got) == 1 and pool.available_memory == 8192 - 1024

