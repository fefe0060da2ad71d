"""KafkaProducer: kafka-python's producer API over the Java client's design.

send() runs on the caller's thread (kcore's SendPath): closed check, metadata wait (bounded by
max_block_ms), serialize, partition, RecordAccumulator.append, and a future back. The Sender
thread does the rest.

Fork (docs/fork.md): in a forked child each producer closes its copies of the parent's sockets
at once (pyprod/fork_registry.py; nothing is sent), and on first use there builds its parts anew
(_build: metadata, connections, an empty accumulator, a Sender thread). What the parent had
buffered, and its futures, stay the parent's. Its parts get their settings from
pyprod/config_factories.py.
"""
import collections
import functools
import logging
import os
import threading
import time
import weakref

import kcore
from pyprod import config as configuration
from pyprod import errors, fork_registry
from pyprod.config_factories import (accumulator_settings, metadata_for, network_client_for,
                                     send_settings, sender_for)
from pyprod.producer_metrics import ProducerMetrics
from pyprod.sasl import aws_msk_iam, oidc_token_provider
from pyprod.sender import now_ms
from pyprod.transaction_manager import TransactionManager

log = logging.getLogger(__name__)

_CLOSE_GRACE_S = 0.1  # close(timeout) waits this long at least for the forced stop


def _send_path_in_child(ref):
    """SendPath's on_fork: the producer's SendPath of this process, built on first use."""
    producer = ref()
    if producer is None:
        raise errors.IllegalStateError("KafkaProducer already closed!")
    producer._here()
    return producer._send_path


def _batch_record_ok(future, index, metadata):
    partition = metadata.partition if hasattr(metadata, "partition") else \
        next(iter(metadata.partition_counts))  # a one-record send_batch
    future.record_done(index, partition)


def _batch_record_failed(future, index, exc):
    if hasattr(exc, "failures"):  # a one-record send_batch
        exc = exc.failures[0][1]
    future.record_done(index, -1, exc)


class KafkaProducer:
    """A drop-in for kafka.KafkaProducer. See kafka-python's documentation for the configs.

    ``send(topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None)``
    publishes a record and returns a FutureRecordMetadata; it raises as kafka-python's does.
    It is kcore's SendPath.send, bound per instance in __init__ (one call into kcore per
    record).
    """

    DEFAULT_CONFIG = configuration.DEFAULTS
    _keep_partition_order = False  # pyprod.aio's subclass sets it: see the Sender's

    def __init__(self, **configs):
        self._closed = True  # until fully built, so close()/__del__ are safe on a failed init
        self.config = configuration.build(**configs)
        self._token_provider = (oidc_token_provider.for_producer(self.config)  # OIDC,
                                or aws_msk_iam.for_producer(self.config))  # AWS, or None
        self._fork_generation = kcore.fork_generation()
        self._build()
        self._closed = False
        fork_registry.opened(self)
        if self.config["api_version"] is None:
            try:  # a refused authentication raises here (Metadata's fatal error)
                self._bootstrap(self.config["bootstrap_timeout_ms"])
            except BaseException:
                self.close(timeout=0)
                raise

    def _build(self):
        """The working parts, from the config (again in a forked child: _here), and the Sender
        thread started."""
        generation = kcore.fork_generation()
        self.__dict__.pop("_batch_path", None)
        self.__dict__.pop("_raw_send_path", None)
        self._metadata = metadata_for(self.config)
        self._client = network_client_for(self.config, self._metadata)
        idempotent = self.config["enable_idempotence"]
        transactional_id = self.config["transactional_id"]
        self._txn_partitions = kcore.TxnPartitionMap(
            self.config["max_in_flight_requests_per_connection"],
            transactional=transactional_id is not None) if idempotent else None
        self._accumulator = kcore.RecordAccumulator(self._metadata, self._txn_partitions,
                                                    **accumulator_settings(self.config))
        self._metadata.add_update_listener(self._accumulator.metadata_updated)
        self._max_block_ms = self.config["max_block_ms"]
        self._metrics = collections.Counter()
        self._sender = sender_for(self.config, self._client, self._metadata, self._accumulator,
                                  self._txn_partitions, self._metrics)
        if self._keep_partition_order:  # before the Sender starts
            self._sender.keep_partition_order()
        self._producer_metrics = ProducerMetrics.for_producer(self)  # metrics(), its reporters
        # transaction_manager: a hook for pyprod.aio (a plain attribute: it reads it per send)
        self.transaction_manager = None
        self._init_result = None
        if transactional_id is not None:
            self.transaction_manager = TransactionManager(
                transactional_id, self.config["transaction_timeout_ms"], self._txn_partitions,
                self._accumulator, self._client, self._metadata,
                retry_backoff_ms=self.config["retry_backoff_ms"],
                request_timeout_ms=self.config["request_timeout_ms"],
                batches_sent=lambda loop=self._sender.produce_loop: loop.batches)
            self._sender.set_transactions(self.transaction_manager)
        self._send_path = kcore.SendPath(
            self._accumulator, self._wait_on_metadata, self._client.network_poll.waker,
            partitioner=self.config["partitioner"], txn_partitions=self._txn_partitions,
            on_fork=functools.partial(_send_path_in_child, weakref.ref(self)),
            **send_settings(self.config))
        self._send_path.divert(*self.__dict__.get("_send_divert", ()))
        self.send = self._send_path.send  # one vectorcall into kcore per record
        self._sender.start()
        fork_registry.built(self, getattr(self._producer_metrics, "lock", None),
                            functools.partial(self._client.network_poll.shutdown,
                                              after_fork=True))
        self._fork_generation = generation  # last: _here() checks it without the lock

    def _here(self):
        """Make the producer this process's: in a forked child, on first use, _build() anew
        (docs/fork.md). IllegalStateError there if it was closed."""
        if self._fork_generation == kcore.fork_generation():
            return
        with fork_registry.rebuild_lock:
            if self._fork_generation == kcore.fork_generation():
                return
            if self._closed:
                raise errors.IllegalStateError("KafkaProducer already closed!")
            log.debug("%r: first use in forked process %d: new connections and Sender thread",
                      self, os.getpid())
            self._build()

    def _bootstrap(self, timeout_ms):
        """kafka-python connects eagerly: fail fast with NoBrokersAvailable, naming each
        bootstrap address and how far it got (as kafka-python's "Unable to bootstrap from")."""
        version = self._metadata.request_update()
        self._sender.wakeup()
        if self._metadata.await_update(version, timeout_ms):
            return
        addrs, tried = [], []
        for i, (host, port) in enumerate(self.config["bootstrap"]):
            addrs.append("[%s]:%s" % (host, port) if ":" in host else "%s:%s" % (host, port))
            conn = self._client.connection(-(i + 1))  # bootstrap nodes are -1, -2, ...
            if conn is None:
                how = "not tried"
            elif conn.error is not None and conn.state == "DISCONNECTED":
                n = conn.failed_attempts
                how = "%d connection attempt%s failed, last error %s" % (
                    n, "" if n == 1 else "s", conn.error)
            elif conn.state == "READY":
                how = "connected, no answer to the metadata request"
            else:
                how = conn.state.lower().replace("_", " ")
            tried.append("%s: %s" % (addrs[-1], how))
        self.close(timeout=0)
        raise errors.NoBrokersAvailable(
            "Unable to bootstrap from %s: no broker answered a metadata request within %.1f s "
            "(bootstrap_timeout_ms=%d). Per address: %s" % (
                ",".join(addrs), timeout_ms / 1000, timeout_ms, "; ".join(tried)))

    # -- the caller thread: send() is kcore's SendPath.send, bound in __init__ ---------------
    def _divert_send(self, context_var=None, key=None, send=None):
        """pyprod.otel's hook: kcore.SendPath.divert for send(), kept in a forked child."""
        self._send_divert = (context_var, key, send)
        self._send_path.divert(context_var, key, send)

    def _send_direct(self, topic, value=None, key=None, headers=None, partition=None,
                     timestamp_ms=None):
        """send() without _divert_send's divert."""
        return self._send_path.send_direct(topic, value, key, headers, partition, timestamp_ms)

    def send_batch(self, topic, values, keys=None, headers=None, partitions=None,
                   timestamps=None):
        """Publish many records in one call; returns ONE future for all of them.

        values / keys: sequences of bytes, bytearray, memoryview, str (UTF-8) or None (null),
        put through the configured serializers like send() (None stays null), or pyarrow
        binary/large_binary/string/large_string arrays or chunked arrays, or numpy S (trailing
        NULs dropped) / U (UTF-8) arrays, taken as raw bytes (numpy object arrays are
        sequences). headers: per record None or [(str, bytes|None)], or a pyarrow
        list<struct<key: string, value: binary>> array. partitions: per record int or None
        (the partitioner decides), or a pyarrow / numpy integer array. timestamps: per record
        ms or None (now), or a pyarrow int64 or timestamp array of any unit, or a numpy integer
        (ms) or datetime64 array of any unit (NaT: now). A pandas Series or Index is taken as
        its numpy or (Arrow-backed) pyarrow array; nullable Int64 NA is None, tz-aware times
        are UTC (docs/send_batch.md). Bad input raises TypeError / ValueError before any
        record is appended; metadata and memory waits raise KafkaTimeoutError after
        max_block_ms as send() does (the message says how many records were appended; those
        are still delivered).

        The future completes once every record has: its value is BatchMetadata(topic,
        record_count, partition_counts); on failure its exception is a BatchDeliveryError
        whose ``failures`` lists (record index, exception) in index order (a record over
        max_request_size fails alone there, the others still go).
        """
        self._here()
        path = self.__dict__.get("_batch_path")
        if path is None:
            path = self._batch_path = kcore.BatchSendPath(
                self._send_path, self._accumulator, self._wait_on_metadata, self._client.network_poll.waker,
                **send_settings(self.config))
        if self.config["partitioner"] is not None:
            return self._send_batch_each(path, topic, values, keys, headers, partitions,
                                         timestamps)
        return path.send(topic, values, keys, headers, partitions, timestamps)

    def _send_batch_each(self, path, topic, values, keys, headers, partitions, timestamps):
        """send_batch with a custom partitioner: one send() per record, one future."""
        sp = self._send_path
        sp.check_usable()
        vals, keys, hdrs, parts, stamps = kcore.prepare_rows(
            topic, values, keys, headers, partitions, timestamps, path.key_serializer,
            path.value_serializer)
        raw = self.__dict__.get("_raw_send_path")
        if raw is None:  # serialized already
            raw = self._raw_send_path = kcore.SendPath(
                self._accumulator, self._wait_on_metadata, self._client.network_poll.waker,
                txn_partitions=self._txn_partitions, **send_settings(self.config, serialize=False))
        custom = self._partition_with(self.config["partitioner"])
        n = len(vals)
        future = kcore.BatchFuture(topic, n)
        if n:
            top = max((p for p in parts if p is not None), default=None)
            try:
                self._wait_on_metadata(topic, top, self._max_block_ms)
            except errors.KafkaTimeoutError as e:
                raise errors.KafkaTimeoutError(
                    "send_batch: %s; no records were appended" % (e,)) from e
        appended = 0
        for i in range(n):
            part = parts[i]
            if part is None:
                part = custom(topic, keys[i], keys[i], vals[i], vals[i])
            if sp.closed:
                raise errors.IllegalStateError("KafkaProducer already closed!")
            try:
                if vals[i] is None and keys[i] is None:  # send() wants one of them
                    f = path.send(topic, [None], None, [hdrs[i]], [part], [stamps[i]])
                else:
                    f = raw.send(topic, vals[i], keys[i], hdrs[i], part, stamps[i])
            except errors.MessageSizeTooLargeError as e:
                future.fail_now(i, e)
                continue
            except errors.KafkaTimeoutError as e:
                raise errors.KafkaTimeoutError(
                    "send_batch: %s; %d of %d records were appended before and will still be "
                    "delivered" % (e, appended, n)) from e
            appended += 1
            future.add_pending(1)
            f.add_callback(_batch_record_ok, future, i)
            f.add_errback(_batch_record_failed, future, i)
        future.seal()
        return future

    def _partition_with(self, partitioner):
        """A (topic, key, key_bytes, value, value_bytes) -> partition call of a user partitioner."""
        def partition(topic, key, key_bytes, value, value_bytes):
            return kcore.custom_partition(partitioner, topic, key, key_bytes, value,
                                          value_bytes, self._metadata.cluster)
        return partition

    def _wait_on_metadata(self, topic, partition, max_wait_ms):
        """Block until the topic (and partition) is in metadata, at most max_wait_ms; the
        Cluster then."""
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

    # -- transactions (kafka-python's API; Java's semantics) ----------------------------------
    def _transactions(self, what):
        self._here()
        if self.transaction_manager is None:
            raise errors.IllegalStateError(
                "Cannot %s: transactions are not enabled (set transactional_id)" % what)
        if self._closed:
            raise errors.IllegalStateError("KafkaProducer already closed!")
        return self.transaction_manager

    def _await(self, result, what):
        self._sender.wakeup()
        if not result.wait(self._max_block_ms / 1000.0):
            raise errors.KafkaTimeoutError(
                "Timeout expired after %d ms while awaiting %s" % (self._max_block_ms, what))

    def init_transactions(self):
        """Fence earlier producers of this transactional_id (finishing or aborting their
        open transaction) and get the producer id. Waits max_block_ms (KafkaTimeoutError; a
        later call goes on waiting for the same answer)."""
        txn = self._transactions("call init_transactions")
        if self._init_result is None:
            self._init_result = txn.initialize_transactions()
        try:
            self._await(self._init_result, "InitProducerId")
        except errors.KafkaTimeoutError as e:
            raise errors.KafkaTimeoutError(
                "Timeout expired while initializing transactional state in %s ms."
                % self._max_block_ms) from e
        finally:
            if self._init_result.failed:
                self._init_result = None

    def begin_transaction(self):
        """Start a transaction: send() and send_batch() may be called until it ends."""
        self._transactions("begin a transaction").begin_transaction()

    def send_offsets_to_transaction(self, offsets, group_metadata):
        """Commit a consumer group's offsets ({TopicPartition: OffsetAndMetadata or int})
        with the transaction. group_metadata: KafkaConsumer.group_metadata() (KIP-447
        fencing) or a group id."""
        txn = self._transactions("send offsets to a transaction")
        self._await(txn.send_offsets_to_transaction(offsets, group_metadata),
                    "SendOffsetsToTransaction")

    def commit_transaction(self):
        """Send what is buffered, then commit: returns once every record of the transaction
        is written and committed; raises the error that made it impossible otherwise (then
        abort_transaction()). Waits max_block_ms (KafkaTimeoutError; call again to go on
        waiting)."""
        self._await(self._transactions("commit a transaction").begin_commit(),
                    "EndTxn(COMMIT)")

    def abort_transaction(self):
        """Drop what is buffered, wait for what is in flight, and abort."""
        self._await(self._transactions("abort a transaction").begin_abort(), "EndTxn(ABORT)")

    def prepare_transaction(self):
        """Flush and hand the open transaction over, unfinished: a PreparedTransaction that
        another producer of the same transactional_id commits or aborts with
        resume_transaction() (exactly-once Spark writes: the executors prepare, the driver
        commits). This producer sends nothing more in it; close() leaves it open, and the
        broker aborts it after transaction_timeout_ms unless it is finished."""
        txn = self._transactions("prepare a transaction")
        self.flush(self._max_block_ms / 1000.0)
        return txn.prepare()

    def resume_transaction(self, prepared):
        """Take over a PreparedTransaction (instead of init_transactions()); then
        commit_transaction() or abort_transaction() finishes it."""
        self._transactions("resume a transaction").resume(prepared)

    @classmethod
    def max_usable_produce_magic(cls, api_version):
        """kafka-python's: the record format a broker of api_version takes (pyprod writes 2)."""
        if api_version >= (0, 11):
            return 2
        return 1 if api_version >= (0, 10, 0) else 0

    # -- flush, close and the rest of the API -----------------------------------------------
    def flush(self, timeout=None):
        """Send everything buffered and wait until each record completes (or fails)."""
        if self._fork_generation != kcore.fork_generation():
            return  # a forked child that has sent nothing yet: nothing of its own to flush
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
        provider, self._token_provider = getattr(self, "_token_provider", None), None
        if provider is not None:  # the OIDC provider it made: its refresh thread (the cached
            provider.close()      # token still serves a drain at close)
        if getattr(self, "_sender", None) is None:
            return
        self._closed = True
        self._send_path.closed = True
        fork_registry.closed(self)
        if self._fork_generation != kcore.fork_generation():
            return  # an unused forked child: the I/O thread and reporters are the parent's
        if self._producer_metrics is not None:  # its metric_reporters' close()
            self._producer_metrics.close()
        if threading.current_thread() is self._sender:
            self._sender.force_close()
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        if timeout == 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
            self._sender.join(timeout)
            if self._sender.is_alive():
                self._sender.force_close()
        # Forced, the I/O thread fails what is left and stops at once, unless a user callback
        # blocks it: then return by the timeout all the same (it is a daemon thread).
        self._sender.join(None if deadline is None else
                          max(deadline - time.monotonic(), _CLOSE_GRACE_S))

    def partitions_for(self, topic):
        """The set of partition ids of a topic, waiting for metadata up to max_block_ms."""
        self._here()
        self._send_path.check_usable()
        return self.topic_partitions(topic)

    # -- hooks for the layers built on this one (pyprod.aio): not kafka-python's API --------
    # (and the attribute transaction_manager: a transactional producer's
    # pyprod.transaction_manager.TransactionManager, else None)
    def topic_partitions(self, topic):
        """The set of partition ids of a topic, waiting for metadata up to max_block_ms (it
        blocks): partitions_for() without its send() checks, so it works between transactions
        too."""
        return set(self._wait_on_metadata(topic, None, self._max_block_ms)
                   .partitions_for_topic(topic))

    def wakeup(self):
        """Wake the Sender thread, so that a transactional request just queued (commit, abort,
        offsets) goes out now rather than at its next poll."""
        self._sender.wakeup()

    @property
    def buffer_pool(self):
        """The accumulator's kcore BufferPool: send() may block for memory when its
        available_memory is low."""
        return self._accumulator.pool

    def bootstrap_connected(self):
        self._here()
        return self._client.bootstrap_connected()

    def metrics(self, raw=False):
        """kafka-python's producer metrics: {group: {name: value}} (raw: {MetricName:
        KafkaMetric}); None with metrics_enabled=False. See docs/configuration.md#metrics."""
        if self._producer_metrics is None:
            return None
        return self._producer_metrics.metrics(raw)

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
        return "<pyprod.KafkaProducer client_id=%s transactional_id=%s>" % (
            self.config["client_id"], self.config["transactional_id"])

