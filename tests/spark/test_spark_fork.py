"""A fork inside a Spark task (docs/fork.md): the Python worker (itself forked by pyspark's
daemon) holds a producer of pyprod.spark's cache, with records lingering, and forks. The child
sends with the inherited producer and with one of its own from the cache (which starts empty
there); the worker goes on with its cached producer. Everything is read back with kafka-python's
KafkaConsumer."""
from tests.harness import readback
from tests.harness.forked import needs_fork

KEYS, N = 3, 20


def _expected(tasks):
    sent = []
    for index in range(tasks):
        for part in (b"before", b"child-inherited", b"child-cached", b"after"):
            who = b"w%d-%s" % (index, part)
            keys = [b"%s-%d" % (who, i % KEYS) for i in range(N)]
            sent += [readback.Sent(key, b"%s-%d" % (key, i)) for i, key in enumerate(keys)]
    return sent


@needs_fork
def test_a_task_forks_with_a_cached_producer(spark, kafka, topic):
    name = topic(3)
    bootstrap = kafka.bootstrap_servers

    def task(index, _rows):  # runs in a Python worker (pickled by value: nested)
        import os
        import signal

        from pyprod.spark.producer_cache import default_cache

        config = {"bootstrap_servers": bootstrap, "linger_ms": 200}

        def send(producer, part):
            who = b"w%d-%s" % (index, part)
            for i in range(N):
                key = b"%s-%d" % (who, i % KEYS)
                producer.send(name, b"%s-%d" % (key, i), key=key)

        cache = default_cache()
        p = cache.acquire(config)
        send(p, b"before")  # lingering at the fork: the worker's alone
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(60)
                send(p, b"child-inherited")
                p.flush(30)
                own = default_cache().acquire(config)
                if own is p:  # the child's cache starts empty
                    raise RuntimeError("the parent's producer from the child's cache")
                send(own, b"child-cached")
                own.flush(30)
                default_cache().release(own)
                code = 0
            finally:
                os._exit(code)
        status = os.waitpid(pid, 0)[1]
        send(p, b"after")
        p.flush(30)
        cache.release(p)
        yield index, os.waitstatus_to_exitcode(status)

    run = spark.sparkContext.parallelize(range(2), 2).mapPartitionsWithIndex(task).collect()
    assert sorted(run) == [(0, 0), (1, 0)], run
    sent = _expected(2)
    readback.compare(sent, readback.read_all_kafka_python(bootstrap, name, len(sent)),
                     check_timestamps=False)
