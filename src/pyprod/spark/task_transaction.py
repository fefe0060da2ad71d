"""Exactly-once writes, the task side (see pyprod.spark.transactions for the design): on its
first record a task's producer of its transactional id asks whether the driver closed the
run, fences the earlier attempts (InitProducerId) and begins; then sends, flushes, asks again,
and hands the transaction over unfinished (prepare_transaction) in its commit message."""
from __future__ import annotations

import collections

from pyprod import errors
from pyprod.spark import writer as task_writer
from pyprod.spark.sink_log import ExactlyOnceError
from pyprod.spark.transactional_ids import (CLOSE_TIMEOUT_S, closed_id, config_for, log,
                                            new_producer)


class JobEndedError(ExactlyOnceError):
    """A task attempt found its write already committed or aborted by the driver (a zombie:
    a slow or cut-off executor). It aborted its own transaction: none of its rows is visible."""


_no_describe = []  # logged once per process: the brokers have no DescribeTransactions


def run_closed(settings, producer):
    """Whether the driver has closed this task's batch write (its sentinel exists), asked with
    DescribeTransactions through ``producer``. False for streaming, and when the brokers cannot
    say (no DescribeTransactions before Kafka 3.0, or an error: logged)."""
    txn = settings.transactions
    if txn is None or txn.streaming:
        return False
    tid = closed_id(txn)
    result = producer.transaction_manager.describe_transaction(tid)
    try:
        if not result.wait(CLOSE_TIMEOUT_S):
            raise errors.KafkaTimeoutError("no answer in %.0f s" % CLOSE_TIMEOUT_S)
    except errors.UnsupportedVersionError as e:
        if not _no_describe:
            _no_describe.append(e)
            log.warning("pyprod.spark: the brokers have no DescribeTransactions (Kafka < 3.0): "
                        "a task that runs on after its write ended holds back read_committed "
                        "readers until transaction_timeout_ms (%r)", e)
        return False
    except errors.KafkaError as e:
        log.warning("pyprod.spark: could not tell whether the write has ended "
                    "(DescribeTransactions of %s): %r", tid, e)
        return False
    return result.value is not None


def _end_zombie(settings, producer, tid, records):
    """The write has ended without this attempt: abort its transaction (``records`` sent in
    it; None: not begun) and raise JobEndedError."""
    why = None
    if records is not None:
        try:
            producer.abort_transaction()
        except errors.KafkaError as e:  # fenced: the driver's InitProducerId aborted it
            why = e
    raise JobEndedError(
        "pyprod.spark: the exactly-once write (run %s) this task belongs to was already "
        "committed or aborted by the driver when this attempt of %s %s (a late or cut-off "
        "attempt): %s" % (
            settings.transactions.run_id, tid,
            "was about to write" if records is None else "had written %d records" % records,
            "it wrote nothing" if records is None else
            "its records are aborted, read_committed readers never see them" if why is None
            else "its abort failed (%r): the driver's fence or transaction_timeout_ms aborts "
                 "them, read_committed readers never see them" % (why,))) from why


def write(settings, sends, tid, factory=None):
    """Send every (topic, count, kwargs) of ``sends`` in a transaction of ``tid``, flush, and
    hand it over unfinished: (records, PreparedTransaction or None if nothing was sent).
    Raises the first delivery error; the transaction then stays open until the retry's
    InitProducerId (or the driver's abort(), or transaction_timeout_ms) aborts it. Raises
    JobEndedError, its transaction aborted, when the driver has closed the write already
    (asked on the first record, before InitProducerId, and after the flush)."""
    factory = factory or new_producer
    producer, ok, count = None, False, 0
    try:
        pending = collections.deque()
        for topic, n, kwargs in sends:
            if producer is None:
                producer = factory(config_for(settings.configs, tid))
                if run_closed(settings, producer):  # before InitProducerId: it fences nothing
                    _end_zombie(settings, producer, tid, None)
                producer.init_transactions()   # fences the earlier attempts of this partition
                producer.begin_transaction()
            pending.append(producer.send_batch(topic, **kwargs))
            count += n
            task_writer._raise_failed(pending, block=False)
        if producer is None:
            ok = True
            return 0, None
        producer.flush()
        task_writer._raise_failed(pending, block=True)
        if run_closed(settings, producer):
            _end_zombie(settings, producer, tid, count)
        prepared = producer.prepare_transaction()
        ok = True
        return count, prepared
    finally:
        if producer is not None:  # close() leaves the transaction open
            producer.close(timeout=CLOSE_TIMEOUT_S if ok else 0)
