"""KafkaProducer: kafka-python's producer API over the Java client's design.

send() runs on the caller's thread: closed check, metadata wait (bounded by max_block_ms),
serialize, partition, RecordAccumulator.append, and a future back. The Sender thread does the rest.
"""
import atexit
import collections
import logging
import os
import threading
import time
import weakref

from pyprod import config as configuration
from pyprod import errors
from pyprod.future import TopicPartition
from pyprod.metadata import Metadata
from pyprod.network_client import NetworkClient
from pyprod.partitioner import BuiltInPartitioner, custom_partition, keyed_partition
from pyprod.producer_batch import BATCH_HEADER, record_size_upper_bound
from pyprod.record_accumulator import RecordAccumulator
from pyprod.sender import Sender, now_ms
from pyprod.transaction_manager import TransactionManager

log = logging.getLogger(__name__)

_BYTES = (bytes, bytearray, memoryview)
_live = weakref.WeakSet()
_fork_generation = [0]  # bumped in a forked child: producers from the parent refuse to work


def _after_fork_in_child():
    _fork_generation[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all_at_exit():
    for producer in list(_live):
        producer.close()


def _serializer(obj):
    """A (topic, headers, data) -> bytes callable from a kafka-python serializer or callable."""
    if obj is None:
        return None
    method = getattr(obj, "serialize", None)
    if method is None:
        return lambda topic, headers, data: obj(data)

    def serialize(topic, headers, data):
        try:
            return method(topic, headers, data)
        except TypeError:
            return method(topic, data)
    return serialize


class KafkaProducer:
    """A drop-in for kafka.KafkaProducer. See kafka-python's documentation for the configs."""

    DEFAULT_CONFIG = configuration.DEFAULTS

    def __init__(self, **configs):
        self._closed = True  # until fully built, so close()/__del__ are safe on a failed init
        self.config = configuration.build(**configs)
        self._fork_generation = _fork_generation[0]
        self._metadata = Metadata(self.config)
        self._client = NetworkClient(self.config, self._metadata)
        idempotent = self.config["enable_idempotence"]
        self._tm = TransactionManager(self.config["max_in_flight_requests_per_connection"]) \
            if idempotent else None
        self._accumulator = RecordAccumulator(self.config, self._tm)
        self._key_serializer = _serializer(self.config["key_serializer"])
        self._value_serializer = _serializer(self.config["value_serializer"])
        self._custom_partitioner = self.config["partitioner"]
        self._partitioner = BuiltInPartitioner(self.config["batch_size"])
        self._max_block_ms = self.config["max_block_ms"]
        self._metrics = collections.Counter()
        self._sender = Sender(self._client, self._metadata, self._accumulator, self.config,
                              self._tm, self._metrics)
        self._sender.start()
        self._closed = False
        _live.add(self)
        if self.config["api_version"] is None:
            self._bootstrap(self.config["bootstrap_timeout_ms"])

    def _bootstrap(self, timeout_ms):
        """kafka-python connects eagerly: fail fast with NoBrokersAvailable."""
        version = self._metadata.request_update()
        self._sender.wakeup()
        if not self._metadata.await_update(version, timeout_ms):
            self.close(timeout=0)
            raise errors.NoBrokersAvailable()

    # -- the caller thread ------------------------------------------------------------------
    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        """Publish a record; returns a FutureRecordMetadata. Raises as kafka-python does."""
        self._check_usable()
        if not isinstance(topic, str) or not topic:
            raise TypeError("topic must be a non-empty str, got %r" % (topic,))
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        headers = self._check_headers(headers)
        key_bytes = self._key_serializer(topic, headers, key) if self._key_serializer else key
        value_bytes = self._value_serializer(topic, headers, value) \
            if self._value_serializer else value
        if key_bytes is not None and not isinstance(key_bytes, _BYTES):
            raise TypeError("Unsupported type for serialized key: %s" % type(key_bytes))
        if value_bytes is not None and not isinstance(value_bytes, _BYTES):
            raise TypeError("Unsupported type for serialized value: %s" % type(value_bytes))
        if type(key_bytes) is not bytes and key_bytes is not None:
            key_bytes = bytes(key_bytes)
        if type(value_bytes) is not bytes and value_bytes is not None:
            value_bytes = bytes(value_bytes)
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        elif not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise ValueError("timestamp_ms must be a non-negative int, got %r" % (timestamp_ms,))

        start = now_ms()
        cluster = self._metadata.cluster
        parts = cluster.partitions_for_topic(topic)
        if not parts or (partition is not None and partition not in parts):
            cluster = self._wait_on_metadata(topic, partition, self._max_block_ms)
        remaining_ms = max(0, self._max_block_ms - (now_ms() - start))

        size = record_size_upper_bound(key_bytes, value_bytes, headers)
        self._ensure_valid_record_size(BATCH_HEADER + size)
        header_size = sum(len(k.encode("utf-8")) + len(v or b"") for k, v in headers) \
            if headers else -1

        sticky = False
        if partition is not None:
            if not isinstance(partition, int) or partition < 0:
                raise ValueError("partition must be a non-negative int, got %r" % (partition,))
        elif self._custom_partitioner is not None:
            partition = custom_partition(self._custom_partitioner, topic, key, key_bytes, value,
                                         value_bytes, cluster)
        elif key_bytes is not None:
            partition = keyed_partition(key_bytes, cluster.partition_count(topic))
        else:
            partition = self._partitioner.sticky_partition(topic, cluster)
            sticky = True
        if partition is None:
            raise ValueError("Partitioner did not assign a partition for topic %s!" % topic)

        tp = TopicPartition(topic, partition)
        on_new_batch = getattr(self._custom_partitioner, "on_new_batch", None) \
            if key_bytes is None and self._custom_partitioner is not None else None
        future, full, new_batch, aborted = self._accumulator.append(
            tp, timestamp_ms, key_bytes, value_bytes, headers, header_size, size, remaining_ms,
            start, abort_on_new_batch=on_new_batch is not None)
        if aborted:  # KIP-480: a sticky custom partitioner moves on when a batch would start
            on_new_batch(topic, cluster, partition)
            partition = custom_partition(self._custom_partitioner, topic, key, key_bytes, value,
                                         value_bytes, cluster)
            tp = TopicPartition(topic, partition)
            future, full, new_batch, _ = self._accumulator.append(
                tp, timestamp_ms, key_bytes, value_bytes, headers, header_size, size,
                remaining_ms, start)
        if sticky:
            self._partitioner.update(topic, partition, size,
                                     self._accumulator.all_batches_full(tp), cluster)
        if full or new_batch:
            self._sender.wakeup()
        return future

    def _check_usable(self):
        if self._closed:
            raise errors.IllegalStateError("KafkaProducer already closed!")
        if self._fork_generation != _fork_generation[0]:
            raise errors.IllegalStateError(
                "This KafkaProducer was created in the parent process and cannot be used after "
                "fork(): create a new KafkaProducer in the child process.")
        if self._tm is not None and self._tm.fatal_error is not None:
            raise self._tm.fatal_error

    @staticmethod
    def _check_headers(headers):
        if headers is None:
            return []
        if not isinstance(headers, (list, tuple)):
            raise TypeError("headers must be list-type")
        for item in headers:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                    and (item[1] is None or isinstance(item[1], _BYTES))):
                raise TypeError("All headers items must be (str, bytes) tuples, got %r" % (item,))
        return [(k, bytes(v) if v is not None and type(v) is not bytes else v) for k, v in headers]

    def _ensure_valid_record_size(self, size):
        if size > self.config["max_request_size"]:
            raise errors.MessageSizeTooLargeError(
                "The message is %d bytes when serialized which is larger than the maximum request"
                " size you have configured with the max_request_size configuration" % size)
        if size > self.config["buffer_memory"]:
            raise errors.MessageSizeTooLargeError(
                "The message is %d bytes when serialized which is larger than the total memory"
                " buffer you have configured with the buffer_memory configuration." % size)

    def _wait_on_metadata(self, topic, partition, max_wait_ms):
        """Block until the topic (and partition) is in metadata, at most max_wait_ms."""
        self._metadata.add_topic(topic)
        deadline = now_ms() + max_wait_ms
        refreshed = False
        while True:
            cluster = self._metadata.cluster
            parts = cluster.partitions_for_topic(topic)
            if topic in cluster.unauthorized_topics:
                raise errors.TopicAuthorizationFailedError(topic)
            if parts and (partition is None or partition in parts):
                return cluster
            if parts and refreshed:
                raise ValueError("Unrecognized partition %s for topic %s" % (partition, topic))
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise errors.KafkaTimeoutError(
                    "Failed to update metadata after %.1f secs." % (max_wait_ms / 1000.0))
            version = self._metadata.request_update()
            self._sender.wakeup()
            refreshed = self._metadata.await_update(version, remaining)

    # -- flush, close and the rest of the API -----------------------------------------------
    def flush(self, timeout=None):
        """Send everything buffered and wait until each record completes (or fails)."""
        if self._closed and not self._sender.is_alive():
            return
        self._accumulator.begin_flush()
        self._sender.wakeup()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for result in self._accumulator.incomplete_results():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not result.wait(left):
                    raise errors.KafkaTimeoutError(
                        "Failed to flush buffered records within %s secs" % (timeout,))
        finally:
            self._accumulator.end_flush()

    def close(self, timeout=None, null_logger=False):
        """Flush and stop. Idempotent. timeout=0 abandons what is unsent."""
        if getattr(self, "_sender", None) is None:
            return
        self._closed = True
        _live.discard(self)
        if self._fork_generation != _fork_generation[0]:
            return  # the parent's I/O thread does not exist here
        if threading.current_thread() is self._sender or timeout == 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
            self._sender.join(timeout)
            if self._sender.is_alive():
                self._sender.force_close()
        if threading.current_thread() is not self._sender:
            self._sender.join()

    def partitions_for(self, topic):
        """The set of partition ids of a topic, waiting for metadata up to max_block_ms."""
        self._check_usable()
        return set(self._wait_on_metadata(topic, None, self._max_block_ms)
                   .partitions_for_topic(topic))

    def bootstrap_connected(self):
        return self._client.bootstrap_connected()

    def metrics(self, raw=False):
        metrics = dict(self._metrics)
        metrics["buffer-available-bytes"] = self._accumulator.pool.available_memory
        metrics["waiting-threads"] = self._accumulator.pool.waiters
        metrics["metadata-version"] = self._metadata.version
        return {"producer-metrics": metrics}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "KafkaProducer cannot be pickled or sent to another process: create the producer "
            "inside the task that uses it (with Spark, use pyprod.spark, or create it inside "
            "foreachPartition / mapInArrow).")

    def __repr__(self):
        return "<pyprod.KafkaProducer client_id=%s>" % self.config["client_id"]

