"""Four caller threads share one producer while flush() and close() race the Sender loop.

Every future completes, every acknowledged record is read back once by kafka-python, and each
thread's records of one key keep their order. A send() that loses the race with close() raises
IllegalStateError; nothing else may escape."""
import threading

import pytest

from pyprod import KafkaProducer, errors
from tests.harness.readback import read_all_kafka_python

THREADS = 4
PER_THREAD = 4000
KEYS = 8


class Caller(threading.Thread):
    def __init__(self, producer, topic, n, start):
        super().__init__(daemon=True)
        self.producer, self.topic, self.n = producer, topic, n
        self.start_gate = start
        self.futures, self.refused, self.escaped, self.called = [], 0, [], 0

    def _done(self, *_):
        self.called += 1  # one callback per record, on the I/O thread

    def run(self):
        self.start_gate.wait()
        name = self.name.encode()
        for i in range(self.n):
            try:
                f = self.producer.send(self.topic, b"%s-%06d" % (name, i),
                                       key=b"%s-%d" % (name, i % KEYS))
            except errors.IllegalStateError:
                self.refused += 1  # close() won the race
                continue
            except BaseException as e:  # noqa: BLE001 - the test reports anything else
                self.escaped.append(e)
                return
            f.add_both(self._done)
            self.futures.append(f)


def _run(kafka, name, close_early, **config):
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, **config)
    p.send(name, b"warm", key=b"warm").get(30)
    gate = threading.Event()
    callers = [Caller(p, name, PER_THREAD, gate) for _ in range(THREADS)]
    stop = threading.Event()
    flushes = []

    def flusher():
        while not stop.is_set():
            p.flush(timeout=30)
            flushes.append(1)

    flush_thread = threading.Thread(target=flusher, daemon=True)
    for t in callers:
        t.start()
    flush_thread.start()
    gate.set()
    if close_early:
        while sum(len(c.futures) for c in callers) < THREADS * PER_THREAD // 3:
            threading.Event().wait(0.005)
        p.close(timeout=30)
    for t in callers:
        t.join(60)
        assert not t.is_alive()
    stop.set()
    flush_thread.join(60)
    assert not flush_thread.is_alive() and flushes
    p.close(timeout=30)
    return callers


@pytest.mark.parametrize("close_early", [False, True], ids=["flush", "close-racing"])
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks1"])
def test_four_callers_flush_and_close_race_the_sender(kafka, topic, close_early, idempotent):
    name = topic(3)
    config = dict(linger_ms=2, batch_size=4096) if idempotent else \
        dict(acks=1, enable_idempotence=False, linger_ms=2, batch_size=4096)
    callers = _run(kafka, name, close_early, **config)
    acked = {}
    for c in callers:
        assert not c.escaped, c.escaped
        assert all(f.is_done for f in c.futures), "a future outlived close()"
        assert c.called == len(c.futures)
        for f in c.futures:
            if f.failed():
                assert isinstance(f.exception, errors.KafkaError), f.exception
            else:
                md = f.value
                acked[(md.partition, md.offset)] = f
        if not close_early:
            assert c.refused == 0 and len(c.futures) == PER_THREAD
    assert close_early or len(acked) == THREADS * PER_THREAD
    read = read_all_kafka_python(kafka.bootstrap_servers, name, expected_count=len(acked) + 1)
    read = [r for r in read if r.key != b"warm"]
    assert {(r.partition, r.offset) for r in read} >= set(acked), "an acknowledged record is lost"
    values = [r.value for r in read]
    assert len(values) == len(set(values)), "a record was written twice"
    last = {}
    for r in read:  # read is in (partition, offset) order; a key sits on one partition
        seq = int(r.value.rsplit(b"-", 1)[1])
        assert last.get(r.key, -1) < seq, "records of key %r out of order" % (r.key,)
        last[r.key] = seq
