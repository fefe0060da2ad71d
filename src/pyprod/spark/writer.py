"""One Spark task's write: its rows go through send_batch on the worker's cached producer,
then a flush; the task fails with the first delivery error. Shared by the Data Source writers
and the Spark 3 helper. Exactly-once writes (settings.transactions set) go through a
transactional producer of the task's own instead: see :mod:`pyprod.spark.transactions`."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from pyprod.spark import columns as cols_mod
from pyprod.spark.producer_cache import default_cache


@dataclass(frozen=True)
class SinkSettings:
    """Everything a task needs (picklable): the topic option, producer configs, columns."""
    topic: object            # str, or None for the 'topic' column
    configs: dict = field(hash=False, repr=False)  # holds secrets: never in a repr
    columns: cols_mod.Columns = None
    # exactly-once: a pyprod.spark.transactions.TransactionSettings; None: at-least-once
    transactions: object = None

    def describe(self):
        return repr(self.topic) if self.topic else "the 'topic' column"


def settings_for(schema, topic, configs, transactions=None):
    """SinkSettings, checked now (on the driver) so a bad job fails before any task runs."""
    return SinkSettings(topic, dict(configs), cols_mod.resolve(schema, topic), transactions)


def _raise_failed(pending, block):
    """Drop completed futures from the left of ``pending``; raise the first failure.
    ``block``: wait for each (after a flush they are all complete)."""
    while pending:
        future = pending[0]
        if not block and not future.is_done:
            return
        if block:
            future.get()  # raises the BatchDeliveryError of the call
        elif future.failed():
            raise future.exception
        pending.popleft()


def write(settings: SinkSettings, sends, cache=None):
    """Send every (topic, count, kwargs) of ``sends`` and flush; the number of records.
    Raises the first delivery error (a pyprod.errors.BatchDeliveryError or the error
    send_batch raised)."""
    cache = cache or default_cache()
    producer = cache.acquire(settings.configs)
    ok = False
    try:
        pending = collections.deque()
        count = 0
        for topic, n, kwargs in sends:
            pending.append(producer.send_batch(topic, **kwargs))
            count += n
            _raise_failed(pending, block=False)
        producer.flush()
        _raise_failed(pending, block=True)
        ok = True
        return count
    finally:
        # a failed task's producer may hold that task's leftovers: never reuse it
        cache.release(producer, discard=not ok)


# Spark hands Python 10,000-row Arrow batches by default; send_batch costs less per record
# in bigger calls, so consecutive batches go out together, up to these bounds.
GROUP_ROWS = 100_000
GROUP_BYTES = 16 * 1024 * 1024


def grouped(batches, rows=GROUP_ROWS, nbytes=GROUP_BYTES):
    """Consecutive RecordBatches as pyarrow Tables of about ``rows`` rows / ``nbytes``
    bytes (their columns are ChunkedArrays, which send_batch takes as they are)."""
    import pyarrow as pa
    group, n, size = [], 0, 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        group.append(batch)
        n += batch.num_rows
        size += batch.nbytes
        if n >= rows or size >= nbytes:
            yield pa.Table.from_batches(group)
            group, n, size = [], 0, 0
    if group:
        yield pa.Table.from_batches(group)


def arrow_sends(settings: SinkSettings, batches):
    """(topic, count, send_batch kwargs) for a task's Arrow RecordBatches."""
    return (s for table in grouped(batches)
            for s in cols_mod.arrow_sends(table, settings.columns, settings.topic))


def row_sends(settings: SinkSettings, rows):
    """(topic, count, send_batch kwargs) for a task's Rows."""
    return cols_mod.row_sends(rows, settings.columns, settings.topic)


def write_arrow(settings: SinkSettings, batches, cache=None):
    """A task's Arrow RecordBatches -> records written."""
    return write(settings, arrow_sends(settings, batches), cache)


def write_rows(settings: SinkSettings, rows, cache=None):
    """A task's Rows -> records written."""
    return write(settings, row_sends(settings, rows), cache)
