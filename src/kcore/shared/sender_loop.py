"""The steps of the Sender's loop that the SenderLoop runs, the same in both implementations
(see kcore/shared/__init__.py): the steady loop itself (Java's Sender.runOnce once a producer id
is set), expiry at delivery_timeout_ms (Java's Sender.failBatch on expired batches) and the
produce step (Java's Sender.sendProducerData: ready(), the ready nodes' connections, drain(),
then one ProduceRequest per node). The client and the metadata are the producer's NetworkClient
and Metadata; the loop reaches the client's connections through its network_poll functions
(``loop.net``, the same implementation as the loop), and its Python methods only for what needs
a decision: connecting, a refused authentication, the Produce version of a new connection."""
import logging

from pyprod.errors import KafkaError, KafkaTimeoutError

log = logging.getLogger("pyprod.sender")
_PRODUCE = 0  # the Produce API key
_QUEUE_SCAN_MAX_MS = 1000   # batches can be created with an older time (send() blocked first)


def _run_once(loop, client, metadata, max_request_size):
    """One loop of the Sender: expiry, the produce step, the client's poll. Returns None, or
    the loop's time (ms) when the producer id needs the Sender's decision first: then only
    expiry has run."""
    now = loop.net.now_ms()
    _fail_expired(loop, now)
    tm = loop.tm
    if tm is not None and (tm.fatal_error is not None or not tm.has_producer_id()):
        return now
    loop.net.poll(client, _send_producer_data(loop, client, metadata, max_request_size, now))
    return None


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


def _send_producer_data(loop, client, metadata, max_request_size, now):
    """The poll timeout in ms: 0 after a send (more may be sendable at once)."""
    accumulator = loop.accumulator
    net = loop.net
    cluster = metadata.cluster
    busy = net.busy_nodes(client)
    result = accumulator.ready(cluster, now, busy)
    if result.unknown_leader_topics:
        for topic in result.unknown_leader_topics:
            metadata.add_topic(topic)
        metadata.request_update()
    ready = set()
    not_ready_timeout = float("inf")
    for node in result.ready_nodes:
        if net.is_ready(client, node, now) or client.ready(node, now):  # (this connects)
            ready.add(node)
            continue
        refused = client.authentication_error(node)
        if refused is not None:  # fail fast: waiting cannot help a refused authentication
            for batch in accumulator.drain(cluster, {node}, max_request_size, now).get(node, ()):
                loop.on_fail(batch, refused)
        not_ready_timeout = min(not_ready_timeout, client.connection_delay(node, now))
    timeout = min(result.next_ready_check_delay_ms, not_ready_timeout,
                  loop.next_deadline_delay(now))
    if not ready:
        return max(0, timeout)
    sent = False
    for node, batches in accumulator.drain(cluster, ready, max_request_size, now, busy).items():
        if batches:
            if loop.guarantee_order:
                for batch in batches:
                    accumulator.mute(batch.topic_partition)
            _send_produce_request(loop, client, node, batches, now)
            sent = True
    return 0 if sent else max(0, timeout)


def _send_produce_request(loop, client, node, batches, now):
    conn = client._conns[node]
    try:  # IncompatibleBrokerVersion: no Produce version in common (v3+ is needed)
        known = conn.produce_version  # (the api versions it was picked from, the version)
        if known is None or known[0] is not conn.api_versions:
            known = conn.produce_version = (conn.api_versions, client.api_version(node, _PRODUCE))
        version = known[1]
        body, on_response = loop.request(version, batches, now)
    except KafkaError as e:
        log.error("Cannot send to node %s: %s", node, e)
        for batch in batches:
            loop.on_fail(batch, e)
        return
    net = loop.net
    net.enqueue(client, conn, _PRODUCE, version, body, loop.acks != 0, on_response,
                loop.request_timeout_ms, net.now_ms(), None)
