"""SendPath: KafkaProducer.send (Java's KafkaProducer.doSend) on the caller's thread.

send() checks that the producer is usable (not closed, no fatal idempotence error; in a forked
child it hands the call to ``on_fork()``'s SendPath, the producer's rebuilt one) and the record's
arguments, serializes key and value, waits (up to max_block_ms) for the topic in the metadata,
refuses a record too large for a request or the buffer memory, picks the
partition (the explicit one; else the user ``partitioner``; else the BuiltInPartitioner: murmur2
of the key, or the topic's sticky partition for a null key), appends to the RecordAccumulator
and returns the record's future. The producer binds its ``send`` to this object's method.
"""
import os
import time

from kcore.pure.builtin_partitioner import partition_for_key
from kcore.pure.network_poll import now_ms
from kcore.pure.producer_batch import BATCH_HEADER, record_size_upper_bound
from kcore._record_accumulator import _too_large
from kcore._send_path import (_INT32_MAX, _INT64_MAX, _as_bytes, _check_headers,
                                    _forked_error, _not_in_metadata, custom_partition)
from kcore.errors import IllegalStateError

__all__ = ["SendPath", "custom_partition", "fork_generation"]

_EMPTY = {}  # a divert's context variable without a value

_fork = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _fork.__setitem__(0, _fork[0] + 1))


def fork_generation():
    """Bumped in every forked child: objects made before a fork can tell they are stale."""
    return _fork[0]


class SendPath:
    """KafkaProducer.send, from the closed check to the returned future."""

    def __init__(self, accumulator, wait_on_metadata, wakeup, *, key_serializer,
                 value_serializer, max_block_ms, max_request_size, buffer_memory,
                 partitioner=None, txn_partitions=None, on_fork=None):
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata  # (topic, partition, max_wait_ms) -> None
        # a Waker (the Sender's) or any callable
        self.wakeup = wakeup.wakeup if callable(getattr(type(wakeup), "wake", None)) else wakeup
        # A user partitioner (see custom_partition); with on_new_batch(topic, cluster,
        # prev_partition), KIP-480: told before a null-key record starts a batch, asked again.
        self.partitioner = partitioner
        self.on_new_batch = getattr(partitioner, "on_new_batch", None)
        self.txn_partitions = txn_partitions
        self.key_serializer = key_serializer      # (topic, headers, data) -> bytes, or None
        self.value_serializer = value_serializer
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.closed = False
        self.fork_generation = fork_generation()
        self.on_fork = on_fork  # () -> the SendPath to use in a forked child; None: refused
        self._divert = None     # (context_var, key, send): see divert()

    def divert(self, context_var=None, key=None, send=None):
        """While context_var's current value (a mapping) holds key, send() calls send(topic,
        value, key, headers, partition, timestamp_ms) instead, which may call send_direct().
        No arguments: no divert."""
        self._divert = None if context_var is None else (context_var, key, send)

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        """Publish a record; a FutureRecordMetadata. Raises as kafka-python's send() does."""
        divert = self._divert
        if divert is not None and divert[1] in divert[0].get(_EMPTY):
            return divert[2](topic, value, key, headers, partition, timestamp_ms)
        return self.send_direct(topic, value, key, headers, partition, timestamp_ms)

    def send_direct(self, topic, value=None, key=None, headers=None, partition=None,
                    timestamp_ms=None):
        """send() without the divert."""
        if self.fork_generation != fork_generation():  # a forked child: the producer's new path
            if self.on_fork is None:
                raise _forked_error()
            return self.on_fork().send_direct(topic, value, key, headers, partition,
                                              timestamp_ms)
        self.check_usable()
        if type(topic) is not str or not topic:
            raise TypeError("topic must be a non-empty str, got %r" % (topic,))
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        headers, header_size = _check_headers(headers)
        kb = key if self.key_serializer is None else self.key_serializer(topic, headers, key)
        vb = value if self.value_serializer is None else \
            self.value_serializer(topic, headers, value)
        kb = _as_bytes(kb, "key")
        vb = _as_bytes(vb, "value")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _INT64_MAX:
            raise ValueError("timestamp_ms must be a non-negative int, got %r" % (timestamp_ms,))
        if partition is not None and (type(partition) is not int or
                                      not 0 <= partition <= _INT32_MAX):
            raise ValueError("partition must be a non-negative int, got %r" % (partition,))

        start = now_ms()
        acc = self.accumulator
        info = acc.topic_info(topic)
        if info is None or (partition is not None and partition >= info.num_partitions):
            self.wait_on_metadata(topic, partition, self.max_block_ms)
            info = acc.topic_info(topic)
            if info is None or (partition is not None and partition >= info.num_partitions):
                raise _not_in_metadata(topic, partition)
        remaining = max(0, self.max_block_ms - (now_ms() - start))

        size = record_size_upper_bound(kb, vb, headers)
        if BATCH_HEADER + size > min(self.max_request_size, self.buffer_memory):
            raise _too_large(BATCH_HEADER + size, self.max_request_size, self.buffer_memory)

        sticky = abort = False
        if partition is None:
            if self.partitioner is not None:
                partition = self._custom(topic, key, kb, value, vb, info)
                abort = kb is None and self.on_new_batch is not None
            elif kb is not None:
                partition = partition_for_key(kb, info.num_partitions)
            else:
                partition = info.partitioner.sticky_partition()
                sticky = True
        future, full, new_batch, aborted = acc.append(
            info.tps[partition], timestamp_ms, kb, vb, headers, header_size, size, remaining,
            start, abort)
        if aborted:  # KIP-480: the user partitioner is told, and asked again
            self.on_new_batch(topic, acc.metadata.cluster, partition)
            partition = self._custom(topic, key, kb, value, vb, info)
            future, full, new_batch, _ = acc.append(
                info.tps[partition], timestamp_ms, kb, vb, headers, header_size, size,
                remaining, start)
        if sticky:
            acc.update_partition_info(info, partition, size)
        if new_batch or full:  # once per batch each: it may be sendable now
            self.wakeup()
        return future

    def _custom(self, topic, key, kb, value, vb, info):
        partition = custom_partition(self.partitioner, topic, key, kb, value, vb,
                                     self.accumulator.metadata.cluster)
        if type(partition) is not int or not 0 <= partition < info.num_partitions:
            raise ValueError("Partitioner did not assign a valid partition for topic %s: %r"
                             % (topic, partition))
        return partition

    def check_usable(self):
        if self.closed:
            raise IllegalStateError("KafkaProducer already closed!")
        if self.fork_generation != fork_generation():
            raise _forked_error()
        if self.txn_partitions is not None:  # each read once: another thread may clear it meanwhile
            error = self.txn_partitions.fatal_error
            if error is None:
                error = self.txn_partitions.send_refusal
            if error is not None:
                raise error
