"""send_batch: many records in one call, with one future (pure twin of batch_send.pyx).

The call's records go straight into the accumulator's batches, without a future each. A batch
being filled is marked ``appending`` (drain() and other senders leave it); when the call lets go
of it, it notes a segment ``(future, ordinal, rank, count)`` on the batch: its records
``ordinal..`` are the call's ``rank..`` records of that partition. The batch reports each
segment to the call's BatchFuture when it completes, and a failed range becomes record indices
again only then, from the partition of each record that the call keeps (``_Placement``).

The call's columns are read first, by kcore/pure/batch_columns.py (prepare_rows: checked
per-record lists); this module keeps the append walk.
"""
import collections
import time

from kcore.pure.batch_columns import prepare_rows
from kcore.pure.builtin_partitioner import partition_for_key
from kcore.pure.future import BatchFuture
from kcore.pure.producer_batch import BATCH_HEADER, record_size_upper_bound
from kcore._record_accumulator import _too_large
from kcore._send_path import _not_in_metadata
from kcore.errors import IllegalStateError, KafkaError, KafkaTimeoutError

__all__ = ["BatchSendPath", "prepare_rows"]


class BatchSendPath:
    """KafkaProducer.send_batch (without a custom partitioner: the producer loops over send()
    for that). ``send_path`` is the producer's SendPath (closed and fork checks)."""

    def __init__(self, send_path, accumulator, wait_on_metadata, wakeup, *, key_serializer,
                 value_serializer, max_block_ms, max_request_size, buffer_memory):
        self.send_path = send_path
        self.accumulator = accumulator
        self.wait_on_metadata = wait_on_metadata
        # a Waker (the Sender's) or any callable
        self.wakeup = wakeup.wakeup if callable(getattr(type(wakeup), "wake", None)) else wakeup
        self.key_serializer = key_serializer  # (topic, headers, data) -> bytes, or None
        self.value_serializer = value_serializer
        self.max_block_ms = max_block_ms
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory

    def send(self, topic, values, keys=None, headers=None, partitions=None, timestamps=None):
        """Append every record; the call's BatchFuture."""
        self.send_path.check_usable()
        vals, keys, hdrs, parts, stamps = prepare_rows(
            topic, values, keys, headers, partitions, timestamps, self.key_serializer,
            self.value_serializer)
        n = len(vals)
        placed = _Placement(n)
        future = BatchFuture(topic, n, placed.locate)
        if n:
            info = self._topic(topic, max((p for p in parts if p is not None), default=None))
            future.add_pending(n)  # all of them now; what was not appended off at the end
            call = _Call(self, info, future, placed)
            call.run(vals, keys, hdrs, parts, stamps)
            future.add_pending(call.appended - n)
        future.seal()
        return future

    def _topic(self, topic, top):
        """The TopicInfo, waiting (max_block_ms) for metadata with partition `top`."""
        acc = self.accumulator
        info = acc.topic_info(topic)
        if info is None or (top is not None and top >= info.num_partitions):
            try:
                self.wait_on_metadata(topic, top, self.max_block_ms)
            except KafkaTimeoutError as e:
                raise KafkaTimeoutError("send_batch: %s; no records were appended" % (e,)) \
                    from e
            info = acc.topic_info(topic)
            if info is None or (top is not None and top >= info.num_partitions):
                raise _not_in_metadata(topic, top)
        return info


class _Placement:
    """The partition of each record of a call (-1: not appended, -2: refused): failed ranges
    of (partition, rank) back to record indices."""

    def __init__(self, n):
        self.parts = [-1] * n

    def locate(self, ranges):
        by_part = collections.defaultdict(list)
        for part, rank, count, error, record_errors in ranges:
            by_part[part].append((rank, count, error, record_errors))
        for lst in by_part.values():
            lst.sort(key=lambda r: r[0])
        seen = collections.Counter()
        at = collections.Counter()  # next range to look at, per partition
        out = []
        for index, part in enumerate(self.parts):
            lst = by_part.get(part)
            if lst is None:
                continue
            rank = seen[part]
            seen[part] = rank + 1
            j = at[part]
            while j < len(lst) and lst[j][0] + lst[j][1] <= rank:
                j += 1
            at[part] = j
            if j < len(lst) and lst[j][0] <= rank:
                start, count, error, record_errors = lst[j]
                exc = error if error is not None else (record_errors or {}).get(rank)
                if exc is not None:
                    out.append((index, exc))
        return out


class _Call:
    """One send_batch call's walk over its records."""

    def __init__(self, path, info, future, placed):
        self.path, self.info, self.future, self.placed = path, info, future, placed
        self.acc = path.accumulator
        self.cur = {}   # partition -> the batch held (appending) by this call
        self.seg = {}   # partition -> [ordinal, rank, count] of the held batch's segment
        self.let_go = {}  # partition -> let go of the held batch once full (it was not)
        self.rank = collections.Counter()  # partition -> records appended there before
        self.rolled = False  # the sticky partition's batch filled since it was chosen
        self.appended = 0

    def run(self, vals, keys, hdrs, parts, stamps):
        path, info, future = self.path, self.info, self.future
        partitioner = info.partitioner
        limit = min(path.max_request_size, path.buffer_memory)
        nparts = info.num_partitions
        now = int(time.time() * 1000)
        try:
            for i in range(len(vals)):
                key, value, headers = keys[i], vals[i], hdrs[i]
                size = record_size_upper_bound(key, value, headers)
                if BATCH_HEADER + size > limit:
                    future.fail_now(i, _too_large(BATCH_HEADER + size, path.max_request_size,
                                                  path.buffer_memory))
                    self.placed.parts[i] = -2
                    continue
                part, sticky = parts[i], False
                if part is None:
                    if key is not None:
                        part = partition_for_key(key, nparts)
                    else:
                        part = partitioner.sticky_partition()
                        sticky = True
                ts = stamps[i] if stamps[i] is not None else now
                full = self._append(part, ts, key, value, headers, size)
                self.placed.parts[i] = part
                self.appended += 1
                switch = sticky and partitioner.add_produced(part, size)
                if full:
                    if self.let_go[part]:  # sendable: the Sender may take it now
                        self._release(part)  # (else it is held again, and grows)
                        path.wakeup()
                    if part == partitioner.sticky:
                        self.rolled = True
                # The switch waits for the batch this call filled there (self.rolled).
                if switch and self.rolled and partitioner.switch_from(part):
                    self.rolled = False
        except KafkaTimeoutError as e:
            raise KafkaTimeoutError("send_batch: %s; %d of %d records were appended before "
                                    "and will still be delivered"
                                    % (e, self.appended, len(vals))) from e
        finally:
            self._release_all()
            path.wakeup()

    def _append(self, part, ts, key, value, headers, size):
        """Append to the partition's held batch (grown, or a new one, if it does not fit);
        True if the batch is full (sendable)."""
        batch = self.cur.get(part)
        if batch is None:
            batch = self._take(part, size)
        while not batch.append_records(ts, key, value, headers, size):
            if not batch.grow(size, True):
                self._roll(part)
                batch = self._take(part, size)
        self.seg[part][2] += 1
        return batch.is_full()

    def _take(self, part, size):
        """Hold the partition's open last batch, or a new one."""
        acc, info = self.acc, self.info
        dq = info.deques[part]
        with acc._lock:
            batch = self._hold(part, dq)
            if batch is not None:
                return batch
        need = max(acc.batch_size, BATCH_HEADER + size)
        try:
            memory = acc.pool.allocate(need, 0)
        except KafkaTimeoutError:  # let go of the other batches, then wait for memory
            self._release_all()
            memory = acc.pool.allocate(need, self.path.max_block_ms)
        with acc._lock:
            if acc._closed:
                acc.pool.deallocate(memory)
                raise IllegalStateError("Producer closed while send in progress")
            batch = self._hold(part, dq)
            if batch is not None:  # another thread made one while this one waited
                acc.pool.deallocate(memory)
                return batch
            acc._new_batch(dq, info.tps[part], memory)
            batch = self._hold(part, dq)
        self.path.wakeup()
        return batch

    def _hold(self, part, dq):
        batch = dq[-1] if dq else None
        if batch is None or batch.closed or batch.appending:
            return None
        batch.appending = True
        self.cur[part] = batch
        self.seg[part] = [batch.record_count, self.rank[part], 0]
        self.let_go[part] = not batch.is_full()
        return batch

    def _roll(self, part):
        self.cur[part].closed = True
        if part == self.info.partitioner.sticky:
            self.rolled = True
        self._release(part)

    def _release_all(self):
        """Let go of every held batch, each even if another one raises (the first error)."""
        error = None
        for part in list(self.cur):
            try:
                self._release(part)
            except BaseException as e:
                error = e if error is None else error
        if error is not None:
            raise error

    def _release(self, part):
        """Let go of the held batch, noting the call's records in it."""
        batch = self.cur.pop(part)
        ordinal, rank, count = self.seg.pop(part)
        try:
            if count:
                self.rank[part] += count
                if not batch.add_segment(self.future, ordinal, rank, count):  # aborted
                    self.future.range_done(part, rank, count, batch.result.error or
                                            KafkaError("the batch was aborted while records "
                                                       "were appended"))
        finally:
            batch.appending = False
