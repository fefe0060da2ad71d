"""A KafkaProducer across os.fork() and multiprocessing (fork, forkserver, spawn), everything read
back with kafka-python's KafkaConsumer: the count, each key's order (one partition per key), keys
and values (docs/fork.md). A forked child's first use builds its own connections and Sender
thread; what the parent had buffered at the fork is sent once, by the parent, which goes on
unaffected. spawn and forkserver children cannot get the producer (it refuses pickling): they
make their own."""
import multiprocessing
import threading
import time

import pytest

from pyprod import KafkaProducer
from tests.harness.forked import needs_fork, run_forked
from tests.harness.readback import Sent, compare, read_all_kafka_python

KEYS = 3   # keys per sender
N = 30     # records per sender
_inherited = None  # the parent's producer, as a fork Pool's workers find it


def _records(who, n=N):
    return [Sent(b"%s-%d" % (who, i % KEYS), b"%s-%d-%d" % (who, i % KEYS, i))
            for i in range(n)]


def _send(producer, topic, who, n=N):
    sent = _records(who, n)
    for s in sent:
        producer.send(topic, s.value, key=s.key)
    return sent


def _pool_task(args):  # a fork Pool's worker: the parent's producer; no flush (see below)
    topic, who = args
    _send(_inherited, topic, who)


def _own_producer(bootstrap, topic, who):  # spawn / forkserver: a producer of its own
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        _send(producer, topic, who)


def _read_back(kafka, name, sent):
    compare(sent, read_all_kafka_python(kafka.bootstrap_servers, name, len(sent)),
            check_timestamps=False)


@needs_fork
def test_fork_pool_workers_send_with_the_parents_producer(kafka, topic):
    """Workers of a fork Pool use the producer they inherit without flushing: their exit
    (multiprocessing's finalizers, not atexit) flushes it. The parent's records lingering at
    the fork are the parent's alone."""
    global _inherited
    name = topic(3)
    whos = [b"task%d" % i for i in range(4)]
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=300) as p:
        _inherited = p
        try:
            sent = _send(p, name, b"parent-before")  # lingering in the accumulator
            with multiprocessing.get_context("fork").Pool(2) as pool:
                pool.map(_pool_task, [(name, who) for who in whos], chunksize=1)
                pool.close()
                pool.join()
            sent += _send(p, name, b"parent-after")
        finally:
            _inherited = None
    for who in whos:
        sent += _records(who)
    _read_back(kafka, name, sent)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_spawned_children_make_their_own_producer(kafka, topic, method):
    name = topic(3)
    ctx = multiprocessing.get_context(method)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as p:
        with pytest.raises(TypeError, match="inside the task"):
            ctx.Process(target=_pool_task, args=((name, p),)).start()
        sent = _send(p, name, b"parent")
        child = ctx.Process(target=_own_producer,
                            args=(kafka.bootstrap_servers, name, b"child"))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        sent += _send(p, name, b"parent-after")
    _read_back(kafka, name, sent + _records(b"child"))


@needs_fork
def test_os_fork_while_threads_send(kafka, topic):
    """A thread sends throughout; the child sends, send_batch()es, flushes and closes the
    inherited producer; the parent's thread and Sender never notice."""
    name = topic(3)
    stop, started = threading.Event(), threading.Event()
    by_thread = []
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=2) as p:
        p.send(name, b"warm", key=b"warm").get(30)

        def busy():
            i = 0
            while (not stop.is_set() or i < 200) and i < 5000:
                s = Sent(b"thread-%d" % (i % KEYS), b"thread-%d" % i)
                p.send(name, s.value, key=s.key)
                by_thread.append(s)
                i += 1
                started.set()
                time.sleep(0.0002)

        t = threading.Thread(target=busy)
        t.start()
        started.wait(10)

        def child():
            _send(p, name, b"child")
            values = [b"batch-%d" % i for i in range(10)]
            p.send_batch(name, values, keys=[b"child-batch"] * 10).get(30)
            p.flush(30)
            p.close(10)

        try:
            run_forked(child)
        finally:
            stop.set()
            t.join(30)
        p.flush(30)
        sent = [Sent(b"warm", b"warm")] + by_thread + _send(p, name, b"parent-after")
    sent += _records(b"child") + [Sent(b"child-batch", b"batch-%d" % i) for i in range(10)]
    _read_back(kafka, name, sent)
