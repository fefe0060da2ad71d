# cython: binding=False, wraparound=True
"""Compiled twin of kcore/pure/send_path.py (see it for the design).

SendPath.send is the hot path of the caller thread: arguments, headers, partition and the append
run in C, in one call from Python per record.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Check, PyDict_Contains
from cpython.ref cimport Py_DECREF, PyObject
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_GET_LENGTH
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcore.atomic_impl cimport kc_load_int, kc_store_int
from kcore.builtin_partitioner cimport partition_for_key
from kcore.clock cimport now_ms_c
from kcore.producer_batch cimport size_upper_bound
from kcore.record_accumulator cimport APPEND_ABORTED, APPEND_FULL, APPEND_NEW_BATCH
from kcore.record_batch_builder cimport RBB_HEADER_SIZE, encode_headers


from kcore.record_accumulator import _too_large
from kcore.errors import IllegalStateError

include "_send_path.py"  # send()'s record checks and custom_partition, compiled in here

__all__ = ["SendPath", "custom_partition", "fork_generation"]

cdef extern from "Python.h":
    int PyContextVar_Get(object var, PyObject* default_value, PyObject** value) except -1
    Py_ssize_t PyDict_GET_SIZE(object d)

cdef extern from "clock_impl.h" nogil:
    int64_t kc_wall_ms()
    void kc_install_fork_hook()
    int kc_fork_generation()

kc_install_fork_hook()


def fork_generation():
    """Bumped in every forked child (by a C fork hook)."""
    return kc_fork_generation()


cdef class SendPath:
    """KafkaProducer.send (Java's doSend), from the closed check to the returned future."""

    def __init__(self, RecordAccumulator accumulator, wait_on_metadata, wakeup, *,
                 key_serializer, value_serializer, max_block_ms, max_request_size,
                 buffer_memory, partitioner=None, txn_partitions=None, on_fork=None):
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata
        if isinstance(wakeup, Waker):  # the Sender's: woken C to C
            self.waker, self.wakeup = wakeup, wakeup.wakeup
        else:
            self.wakeup = wakeup
        self.partitioner = partitioner
        self.on_new_batch = getattr(partitioner, "on_new_batch", None)
        self.txn_partitions = txn_partitions
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.fork_gen = kc_fork_generation()
        self.on_fork = on_fork
        self.old_diverts = []

    def check_usable(self):
        if self.fork_gen != kc_fork_generation():
            raise _forked_error()
        self._check_usable()

    cdef object _in_child(self):
        if self.on_fork is None:
            raise _forked_error()
        return self.on_fork()

    @property
    def closed(self):
        return <bint>kc_load_int(&self._closed)

    @closed.setter
    def closed(self, bint value):
        kc_store_int(&self._closed, value)

    cdef int _check_usable(self) except -1:
        cdef TxnPartitionMap txn_partitions = self.txn_partitions
        if kc_load_int(&self._closed):
            raise IllegalStateError("KafkaProducer already closed!")
        if txn_partitions is not None and txn_partitions.errors_hint():
            error = txn_partitions.error_c(1)  # fatal_error, then send_refusal
            if error is None:
                error = txn_partitions.error_c(2)
            if error is not None:
                raise error
        return 0

    def divert(self, context_var=None, key=None, send=None):
        """While context_var's current value (a mapping) holds key, send() calls send(topic,
        value, key, headers, partition, timestamp_ms) instead, which may call send_direct().
        No arguments: no divert."""
        if self.divert_var is not None:  # a caller thread may still be reading them
            self.old_diverts.append((self.divert_var, self.divert_key, self.divert_send))
        self.divert_var, self.divert_key, self.divert_send = context_var, key, send

    def send(self, topic, value=None, key=None, headers=None, partition=None, timestamp_ms=None):
        """Publish a record; a FutureRecordMetadata. Raises as kafka-python's send() does."""
        if self.divert_var is not None and self._diverted():
            return self.divert_send(topic, value, key, headers, partition, timestamp_ms)
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    def send_direct(self, topic, value=None, key=None, headers=None, partition=None,
                    timestamp_ms=None):
        """send() without the divert."""
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    cdef int _diverted(self) except -1:
        cdef PyObject* ctx = NULL
        cdef int found = 0
        PyContextVar_Get(self.divert_var, NULL, &ctx)
        if ctx == NULL:
            return 0
        if PyDict_Check(<object>ctx):  # the value most often is an empty dict: no lookup
            found = PyDict_GET_SIZE(<object>ctx) != 0 and \
                PyDict_Contains(<object>ctx, self.divert_key)
        else:
            found = self.divert_key in <object>ctx
        Py_DECREF(<object>ctx)
        return found

    cdef object _send(self, topic, value, key, headers, partition, timestamp_ms):
        cdef int64_t ts, header_size = -1, start = 0
        cdef int32_t hcount = 0
        cdef int part = -1
        cdef Py_ssize_t hbytes_len = 0
        cdef bytes hbytes = None
        cdef double remaining
        cdef PyObject* known
        cdef TopicInfo info
        if self.fork_gen != kc_fork_generation():  # a forked child: the producer's new path
            return (<SendPath?>self._in_child())._send(topic, value, key, headers, partition,
                                                       timestamp_ms)
        self._check_usable()
        if not PyUnicode_CheckExact(topic) or PyUnicode_GET_LENGTH(topic) == 0:
            raise TypeError("topic must be a non-empty str, got %r" % (topic,))
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if headers is not None:
            headers, header_size = _check_headers(headers)
            if headers:
                hbytes = encode_headers(headers, &hcount)
                hbytes_len = max(header_size, 0)
        kb = key if self.key_serializer is None else self.key_serializer(topic, headers, key)
        vb = value if self.value_serializer is None else \
            self.value_serializer(topic, headers, value)
        if kb is not None and not PyBytes_CheckExact(kb):
            kb = _as_bytes(kb, "key")
        if vb is not None and not PyBytes_CheckExact(vb):
            vb = _as_bytes(vb, "value")
        if timestamp_ms is None:
            ts = kc_wall_ms()
        elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _INT64_MAX:
            raise ValueError("timestamp_ms must be a non-negative int, got %r" % (timestamp_ms,))
        else:
            ts = timestamp_ms
        if partition is not None:
            if type(partition) is not int or not 0 <= partition <= _INT32_MAX:
                raise ValueError("partition must be a non-negative int, got %r" % (partition,))
            part = partition

        # The TopicInfo, borrowed when current: every caller thread shares it (and the
        # accumulator), and a reference taken is an atomic write to it on a free-threaded build
        known = self.accumulator._known_topic(topic)
        if known != NULL and part < (<TopicInfo>known).partitions_c():
            return self._place(<TopicInfo>known, topic, key, value, kb, vb, ts, part, hbytes,
                               hcount, header_size, hbytes_len, self.max_block_ms)
        remaining = self.max_block_ms
        info = self.accumulator._topic_info(topic)
        if info is None or part >= info.partitions_c():
            start = now_ms_c()
            self.wait_on_metadata(topic, partition, self.max_block_ms)
            info = self.accumulator._topic_info(topic)
            if info is None or part >= info.partitions_c():
                raise _not_in_metadata(topic, partition)
            remaining = max(0, self.max_block_ms - (now_ms_c() - start))
        return self._place(info, topic, key, value, kb, vb, ts, part, hbytes, hcount,
                           header_size, hbytes_len, remaining)

    cdef object _place(self, TopicInfo info, topic, key, value, kb, vb, int64_t ts, int part,
                       bytes hbytes, int32_t hcount, int64_t header_size,
                       Py_ssize_t hbytes_len, double remaining):
        """_send's partition and append, into the topic's info (borrowed)."""
        cdef bint sticky = False, abort = False
        cdef int flags = 0
        cdef Py_ssize_t size = size_upper_bound(PyBytes_GET_SIZE(kb) if kb is not None else -1,
                                PyBytes_GET_SIZE(vb) if vb is not None else -1,
                                hbytes_len, hcount)
        if RBB_HEADER_SIZE + size > min(self.max_request_size, self.buffer_memory):
            raise _too_large(RBB_HEADER_SIZE + size, self.max_request_size, self.buffer_memory)

        if part < 0:
            if self.partitioner is not None:
                part = self._custom(topic, key, kb, value, vb, info)
                abort = kb is None and self.on_new_batch is not None
            elif kb is not None:
                part = partition_for_key(<const uint8_t*>PyBytes_AS_STRING(kb),
                                         PyBytes_GET_SIZE(kb), info.partitions_c())
            else:
                part = info.partitioner._sticky_partition()
                sticky = True
        future = self.accumulator._append(info.deques[part], info.tps[part], ts, kb, vb,
                                          hbytes, hcount, header_size, size, remaining, abort,
                                          &flags)
        if flags & APPEND_ABORTED:  # KIP-480: the user partitioner is told, and asked again
            self.on_new_batch(topic, self.accumulator.metadata.cluster, part)
            part = self._custom(topic, key, kb, value, vb, info)
            flags = 0
            future = self.accumulator._append(info.deques[part], info.tps[part], ts, kb, vb,
                                              hbytes, hcount, header_size, size, remaining,
                                              False, &flags)
        if sticky:
            self.accumulator._update_partition_info(info, part, size)
        if flags & (APPEND_NEW_BATCH | APPEND_FULL):  # once per batch each: it may be sendable
            self.wake_sender()
        return future

    cdef int wake_sender(self) except -1:
        if self.waker is not None:
            self.waker.wake()
        else:
            self.wakeup()
        return 0

    cdef int _custom(self, topic, key, kb, value, vb, TopicInfo info) except -1:
        partition = custom_partition(self.partitioner, topic, key, kb, value, vb,
                                     self.accumulator.metadata.cluster)
        if type(partition) is not int or not 0 <= partition < info.partitions_c():
            raise ValueError("Partitioner did not assign a valid partition for topic %s: %r"
                             % (topic, partition))
        return partition
