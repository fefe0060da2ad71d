"""The Spark 4 Python Data Source "pyprod": ``df.write.format("pyprod")`` and
``df.writeStream.format("pyprod")``.

Spark runs writer()/streamWriter() in a Python worker while planning the job (so bad options
and columns fail it before any task starts), write() in each task, and commit()/abort() in a
Python worker after the tasks. The totals are logged on the "pyprod.spark.commit" logger (visible in
``spark.tvf.python_worker_logs()`` with spark.sql.pyspark.worker.logging.enabled, and on the
worker's stderr) and kept in the writer's ``last_commit``.

With the option exactlyOnce, each task writes in a transaction of its own and commit()/abort()
finish them all (see :mod:`pyprod.spark.transactions`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from pyspark.sql import datasource as _ds
from pyspark.sql.datasource import DataSource, WriterCommitMessage

from pyprod.spark import options as sink_options
from pyprod.spark import transactions
from pyprod.spark import writer as task_writer

# commit()/abort() run in a Python worker whose root logger stays at WARNING: this logger
# passes INFO on, so each job's total reaches the worker logs.
log = logging.getLogger("pyprod.spark.commit")
if log.level == logging.NOTSET:
    log.setLevel(logging.INFO)

# Arrow writers where this Spark has them (batch: 4.0, streaming: 4.1), Row writers otherwise.
_ArrowWriter = getattr(_ds, "DataSourceArrowWriter", None)
_StreamArrowWriter = getattr(_ds, "DataSourceStreamArrowWriter", None)


@dataclass
class PyprodCommitMessage(WriterCommitMessage):
    """What one task wrote; with exactlyOnce, also its open transaction (a
    pyprod.transaction_manager.PreparedTransaction, None if it wrote nothing), its partition,
    scope (the write's run id, or the streaming query's id) and micro-batch."""
    records: int
    transaction: object = None
    partition: Optional[int] = None
    scope: Optional[str] = None
    batch_id: Optional[int] = None


def _total(messages):
    done = [m for m in messages if m is not None]
    return sum(m.records for m in done), len(done), len(messages)


class _Report:
    """commit/abort bookkeeping shared by the batch and streaming writers."""
    last_commit = None

    def _report(self, messages, what, batch_id=None, txn=None):
        records, ok_tasks, tasks = _total(messages)
        self.last_commit = {"status": what, "records": records, "tasks": tasks,
                            "succeeded_tasks": ok_tasks, "topic": self._settings.topic,
                            "batch_id": batch_id}
        where = "" if batch_id is None else " (micro-batch %d)" % batch_id
        if txn is not None:
            self.last_commit["transactions"] = txn
        if txn is not None and txn.get("already_committed"):
            self.last_commit["records"] = txn["records_committed"]
            log.warning("pyprod.spark: micro-batch %d was committed by an earlier run of the "
                        "query: the %d records of its re-run were aborted (%d of %d "
                        "transactions), %d records of partitions whose earlier transaction "
                        "was lost were committed, to %s", batch_id,
                        records - txn["records_committed"], txn["aborted"],
                        txn["transactions"], txn["records_committed"],
                        self._settings.describe())
        elif what == "committed":
            log.info("pyprod.spark: committed %d records from %d tasks to %s%s%s",
                     records, tasks, self._settings.describe(), where,
                     "" if txn is None else " (exactly once: %d transactions)"
                     % txn["committed"])
        elif txn is not None:
            log.warning("pyprod.spark: aborted; %d of %d tasks reported success (%d records) "
                        "writing to %s%s; exactly once: %d of %d transactions aborted, %d "
                        "failed tasks' transactional ids fenced: read_committed consumers see "
                        "none of them", ok_tasks, tasks, records, self._settings.describe(),
                        where, txn["aborted"], txn["transactions"], txn["fenced"])
        else:
            log.warning("pyprod.spark: aborted; %d of %d tasks reported success (%d records, "
                        "which stay in Kafka: a Kafka sink cannot roll back) writing to %s%s",
                        ok_tasks, tasks, records, self._settings.describe(), where)
        return self.last_commit


class _Writer(_Report):
    def __init__(self, settings):
        self._settings = settings

    def commit(self, messages):
        txn = None
        if self._settings.transactions is not None:
            txn = transactions.commit_batch(self._settings, messages)
        self._report(messages, "committed", txn=txn)

    def abort(self, messages):
        txn = None
        if self._settings.transactions is not None:
            txn = transactions.abort_batch(self._settings, messages)
        self._report(messages, "aborted", txn=txn)


class _StreamWriter(_Report):
    def __init__(self, settings):
        self._settings = settings

    def commit(self, messages, batchId):
        txn = None
        if self._settings.transactions is not None:
            txn = transactions.commit_stream(self._settings, messages, batchId)
        self._report(messages, "committed", batchId, txn=txn)

    def abort(self, messages, batchId):
        txn = None
        if self._settings.transactions is not None:
            txn = transactions.abort_stream(self._settings, messages, batchId)
        self._report(messages, "aborted", batchId, txn=txn)


def _message(settings, sends):
    """One task's write -> its commit message."""
    if settings.transactions is None:
        return PyprodCommitMessage(task_writer.write(settings, sends))
    task = transactions.current_task(settings.transactions)
    records, prepared = transactions.write(settings, sends, task.transactional_id)
    return PyprodCommitMessage(records, prepared, task.partition, task.scope, task.batch_id)


def _write_arrow(self, iterator):
    return _message(self._settings, task_writer.arrow_sends(self._settings, iterator))


def _write_rows(self, iterator):
    return _message(self._settings, task_writer.row_sends(self._settings, iterator))


def _writer_class(name, report, arrow_base, row_base):
    base = arrow_base if arrow_base is not None else row_base
    write = _write_arrow if arrow_base is not None else _write_rows
    return type(name, (report, base), {"write": write, "__module__": __name__})


PyprodWriter = _writer_class("PyprodWriter", _Writer, _ArrowWriter, _ds.DataSourceWriter)
PyprodStreamWriter = _writer_class("PyprodStreamWriter", _StreamWriter, _StreamArrowWriter,
                                   _ds.DataSourceStreamWriter)
# the Row writers, for tests and for Sparks without Arrow writers
PyprodRowWriter = _writer_class("PyprodRowWriter", _Writer, None, _ds.DataSourceWriter)
PyprodStreamRowWriter = _writer_class("PyprodStreamRowWriter", _StreamWriter, None,
                                      _ds.DataSourceStreamWriter)


class PyprodDataSource(DataSource):
    """format("pyprod"): a Kafka sink with the columns and options of Spark's own."""

    @classmethod
    def name(cls):
        return "pyprod"

    def _settings(self, schema, overwrite, streaming):
        if overwrite and not streaming:  # streaming 'complete' mode re-sends all rows: fine
            raise ValueError("format('pyprod') appends to Kafka topics: use mode('append'); "
                             "a topic cannot be overwritten")
        opts = sink_options.parse_sink(self.options, streaming=streaming)
        txn = None
        if opts.exactly_once and streaming:
            txn = transactions.for_stream(opts.transactional_id_prefix, opts.checkpoint_location)
        elif opts.exactly_once:
            txn = transactions.for_batch(opts.transactional_id_prefix)
        return task_writer.settings_for(schema, opts.topic, opts.configs, txn)

    def writer(self, schema, overwrite):
        return PyprodWriter(self._settings(schema, overwrite, streaming=False))

    def streamWriter(self, schema, overwrite):
        settings = self._settings(schema, overwrite, streaming=True)
        # Spark calls this when it plans each micro-batch, before the tasks, and again in its
        # commit runner, after them: a batch a crash left half-committed is finished at
        # planning only (the re-run's tasks would fence its transactions).
        if settings.transactions is not None and not transactions.in_commit_runner():
            transactions.recover(settings)
        return PyprodStreamWriter(settings)
