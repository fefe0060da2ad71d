"""The steps of the Sender's loop that the SenderLoop runs, the same in both implementations
(see kcore/___init__.py): the loop itself (Java's Sender.run and runOnce), for every
producer: a transactional one's step first (its TransactionManager's requests, one at a time),
then expiry at delivery_timeout_ms (Java's Sender.failBatch on expired batches) and the produce
step (Java's Sender.sendProducerData: ready(), and drain() of the ready nodes whose connections
can take a request, chosen in one section (without the GIL for many queues); the other ready
nodes' connections; then one ProduceRequest per node); and the closing drain and shutdown. The
client and the metadata are the producer's NetworkClient and Metadata. The loop reaches the
network through ``loop.net`` (the client's NetworkPoll: the data path), and the client's Python
methods only for what needs a decision: a node to connect to, a refused authentication."""
import logging
import time

from kcore.errors import KafkaError, KafkaTimeoutError, UnsupportedCompressionTypeError

log = logging.getLogger("kcore.sender_loop")
_PRODUCE = 0  # the Produce API key
_PRODUCE_ZSTD = 7  # the first Produce version that may carry zstd batches (Kafka 2.1)
_QUEUE_SCAN_MAX_MS = 1000   # batches can be created with an older time (send() blocked first)
# A node sent a ProduceRequest less than min(this, linger_ms) ago counts as busy (as with
# requests in flight): its batches go once grown to batch_max_size or lingered, not at
# batch_size, so a record still waits at most linger_ms. A Sender that runs beside its callers
# (free-threaded, or a broker that answers in microseconds) would otherwise send a request per
# batch or two, at a cost per request that dwarfs its records' (bench/gil_two_cores.py).
_REQUEST_SPACING_US = 2000
_NODE_COUNTERS = ("requests", "request_bytes", "request_max", "responses", "response_bytes",
                  "latency_sum", "latency_max", "throttle_sum", "throttle_max")


def _run(loop, sender):
    """The Sender thread's life (Java's Sender.run): a step while loop.running, then the closing
    drain unless forced (what is left is sent, a transactional producer's open transaction is
    aborted and its requests get delivery_timeout_ms), then the shutdown: what is still pending
    fails, and the connections close."""
    transaction_manager = sender.transaction_manager  # a transactional producer's, or None
    accumulator, net = loop.accumulator, loop.net
    net.precise_timers()  # linger ends on time: no timer slack on this thread's polls
    while loop.running:
        _step(loop, sender, transaction_manager)
    if transaction_manager is not None and not loop.forced and \
            transaction_manager.in_transaction():
        log.info("Aborting incomplete transaction due to shutdown")
        transaction_manager.begin_abort()
    txn_deadline = net.now_ms() + loop.delivery_timeout_ms
    while not loop.forced and (
            accumulator.has_undrained() or net.in_flight_count() > 0 or
            (transaction_manager is not None and transaction_manager.has_pending() and
             net.now_ms() < txn_deadline)):
        _step(loop, sender, transaction_manager)
    if transaction_manager is not None:
        transaction_manager.close(KafkaError("Producer closed"))
    if accumulator.has_incomplete():
        accumulator.abort_incomplete(KafkaError("Producer is closed forcefully."))
    loop.in_flight.clear()
    net.shutdown()


def _step(loop, sender, transaction_manager):
    """One loop, the I/O thread's one catch-all: an error is logged; it never ends the
    thread."""
    try:
        _pass(loop, sender, transaction_manager)
    except Exception:  # never let the I/O thread die silently
        log.exception("Uncaught error in the pyprod sender thread")
        time.sleep(0.01)


def _pass(loop, sender, transaction_manager):
    """One loop: the transactional step (transaction_manager: pyprod's TransactionManager, or
    None; a delay from it means a request of its own goes first: poll, nothing produced), then
    _run_once, and the producer id's decisions through sender.decide(now)."""
    if transaction_manager is not None:
        now = loop.net.now_ms()
        _fail_expired(loop, now)
        delay = transaction_manager.run(sender, now)
        if delay is not None:
            loop.net.poll(delay)
            return
    now = _run_once(loop, sender.client, sender.metadata, sender.max_request_size)
    if now is not None:
        sender.decide(now)


def _run_once(loop, client, metadata, max_request_size):
    """One loop of the Sender: expiry, the produce step, the client's poll. Returns None, or
    the loop's time (ms) when the producer id needs the Sender's decision first: then only
    expiry has run. Linger is timed to the microsecond (librdkafka's precision): the loop's
    time is read in microseconds, its ms part is the loop's now."""
    now_us = loop.net.now_us()
    now = now_us // 1000
    _fail_expired(loop, now)
    txn_partitions = loop.txn_partitions
    if txn_partitions is not None and (txn_partitions.fatal_error is not None or
                                       not txn_partitions.has_producer_id()):
        return now
    loop.poll_net(_send_producer_data(loop, client, metadata, max_request_size, now, now_us),
                  now)
    return None


def _snapshot(loop, now, reset):
    """SenderLoop.snapshot: (now, the loop's counters, {topic: its counters}, {node: its
    counters}, the Sender's totals), as dicts; reset (the Sender thread's own snapshots only):
    the *_max counters start again (sender_loop.pxd)."""
    topics = {topic: {"records": t.records, "bytes": t.bytes, "batches": t.batches,
                      "ratio": t.ratio_sum} for topic, t in list(loop.topic_tallies.items())}
    nodes = {}
    for node, n in list(loop.node_tallies.items()):
        nodes[node] = {name: getattr(n, name) for name in _NODE_COUNTERS}
        if reset:
            n.request_max = n.latency_max = n.throttle_max = 0
    counts = {"produce_requests": loop.requests, "batches": loop.batches,
              "records": loop.records_out, "bytes": loop.bytes_out, "ratio": loop.ratio_sum,
              "rsize": loop.record_size_sum, "queue": loop.queue_ms_sum,
              "batch_max": loop.batch_max, "queue_max": loop.queue_ms_max,
              "rsize_max": loop.record_size_max, "poll_ns": loop.poll_ns, "polls": loop.polls}
    if reset:
        loop.batch_max = loop.queue_ms_max = 0
        loop.record_size_max = 0.0
    return now, counts, topics, nodes, None if loop.totals is None else dict(loop.totals)


def _fail_expired(loop, now):
    """Fail the batches whose delivery deadline passed: in flight (the wheel says which), and
    in the queues when the wheel's look at them is due (then the next look is scheduled)."""
    expired, scan = loop.expire(now)
    for batch in expired:  # its request is still out
        loop.on_fail(batch, _expired_error(batch, now, " while in flight"))
    if scan:
        accumulator = loop.accumulator
        for batch in accumulator.expired_batches(now):
            loop.on_fail(batch, _expired_error(batch, now, ""))
        loop.schedule_queue_scan(now, now + min(accumulator.next_expiry_delay(now),
                                                _QUEUE_SCAN_MAX_MS))


def _expired_error(batch, now, where):
    return KafkaTimeoutError(
        "Expiring %d record(s) for %s:%d ms has passed since batch creation%s" % (
            batch.record_count, batch.topic_partition, now - batch.created_ms, where))


def _send_producer_data(loop, client, metadata, max_request_size, now, now_us=None):
    """The poll timeout in ms (fractional when now_us is given): 0 after a send (more may be
    sendable at once)."""
    accumulator = loop.accumulator
    net = loop.net
    cluster = metadata.cluster
    busy = net.busy_nodes()
    spacing_ms = float("inf")  # until the first node busy by spacing alone may send again
    if now_us is not None and loop.sent_us:
        spacing = min(_REQUEST_SPACING_US, accumulator.linger_ms * 1000)
        for node, at in loop.sent_us.items():
            left = at + spacing - now_us
            if left > 0 and node not in busy:
                busy = set(busy)
                busy.add(node)
                spacing_ms = min(spacing_ms, left / 1000)
    sendable = net.sendable_nodes(now)
    result, drained = accumulator.ready_drain(cluster, now, busy, sendable, max_request_size,
                                              now_us)
    if result.unknown_leader_topics:
        for topic in result.unknown_leader_topics:
            metadata.add_topic(topic)
        metadata.request_update()
    not_ready_timeout = float("inf")
    for node in result.ready_nodes:
        if node in sendable:
            continue
        delay = net.ready_delay(node)  # READY: busy, or metadata goes first
        if delay is None:
            client.ready(node, now)  # connects, once its reconnect backoff has passed
            refused = client.authentication_error(node)
            if refused is not None:  # fail fast: waiting cannot help a refused authentication
                for batch in accumulator.drain(cluster, {node}, max_request_size, now).get(
                        node, ()):
                    loop.on_fail(batch, refused)
            delay = client.connection_delay(node, now)
        not_ready_timeout = min(not_ready_timeout, delay)
    timeout = min(result.next_ready_check_delay_ms, not_ready_timeout,
                  loop.next_deadline_delay(now), spacing_ms)
    sent = False
    for node, batches in drained.items():
        if batches:
            if loop.guarantee_order:
                for batch in batches:
                    accumulator.mute(batch.topic_partition)
            _send_produce_request(loop, client, node, batches, now)
            if now_us is not None:
                loop.sent_us[node] = now_us
            sent = True
    return 0 if sent else max(0, timeout)


def _send_produce_request(loop, client, node, batches, now):
    net = loop.net
    try:  # IncompatibleBrokerVersion: no Produce version in common (v3+ is needed)
        version = net.produce_version(node)
        if version < _PRODUCE_ZSTD and loop.accumulator.compression_type == "zstd":
            raise UnsupportedCompressionTypeError(  # as Java's ProduceRequest refuses it
                "compression_type='zstd' needs brokers of Kafka 2.1 or newer (Produce v7); "
                "node %s speaks Produce v%d at most (older than Kafka 2.1)" % (node, version))
        body, on_response = loop.request(version, batches, now, node)
    except KafkaError as e:
        log.error("Cannot send to node %s: %s", node, e)
        for batch in batches:
            loop.on_fail(batch, e)
        return
    net.send_request(node, _PRODUCE, version, body, loop.acks != 0, on_response,
                     loop.request_timeout_ms)
