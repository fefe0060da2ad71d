"""The steps of the Sender's loop that the SenderLoop runs, the same in both implementations
(see kcore/shared/__init__.py): expiry at delivery_timeout_ms (Java's Sender.failBatch on
expired batches) and the produce step (Java's Sender.sendProducerData: ready(), the ready nodes'
connections, drain(), then one ProduceRequest per node). The client and the metadata are the
producer's NetworkClient and Metadata, reached through their Python API."""
import logging

from pyprod.errors import KafkaError, KafkaTimeoutError

log = logging.getLogger("pyprod.sender")
_PRODUCE = 0  # the Produce API key
_QUEUE_SCAN_MAX_MS = 1000   # batches can be created with an older time (send() blocked first)


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
    cluster = metadata.cluster
    busy = client.busy_nodes()
    result = accumulator.ready(cluster, now, busy)
    if result.unknown_leader_topics:
        for topic in result.unknown_leader_topics:
            metadata.add_topic(topic)
        metadata.request_update()
    ready = set()
    not_ready_timeout = float("inf")
    for node in result.ready_nodes:
        if client.ready(node, now):
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
    try:  # IncompatibleBrokerVersion: no Produce version in common (v3+ is needed)
        version = client.api_version(node, _PRODUCE)
        body, on_response = loop.request(version, batches, now)
    except KafkaError as e:
        log.error("Cannot send to node %s: %s", node, e)
        for batch in batches:
            loop.on_fail(batch, e)
        return
    client.send(node, _PRODUCE, version, body, expects_response=loop.acks != 0,
                callback=on_response, timeout_ms=loop.request_timeout_ms)
