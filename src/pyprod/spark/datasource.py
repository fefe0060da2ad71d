"""The Spark 4 Python Data Source "pyprod": ``df.write.format("pyprod")`` and
``df.writeStream.format("pyprod")``.

Spark runs writer()/streamWriter() in a Python worker while planning the job (so bad options
and columns fail it before any task starts), write() in each task, and commit()/abort() in a
Python worker after the tasks. The totals are logged on the "pyprod.spark.commit" logger (visible in
``spark.tvf.python_worker_logs()`` with spark.sql.pyspark.worker.logging.enabled, and on the
worker's stderr) and kept in the writer's ``last_commit``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import datasource as _ds
from pyspark.sql.datasource import DataSource, WriterCommitMessage

from pyprod.spark import options as sink_options
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
    """What one task wrote."""
    records: int


def _total(messages):
    done = [m for m in messages if m is not None]
    return sum(m.records for m in done), len(done), len(messages)


class _Report:
    """commit/abort bookkeeping shared by the batch and streaming writers."""
    last_commit = None

    def _report(self, messages, what, batch_id=None):
        records, ok_tasks, tasks = _total(messages)
        self.last_commit = {"status": what, "records": records, "tasks": tasks,
                            "succeeded_tasks": ok_tasks, "topic": self._settings.topic,
                            "batch_id": batch_id}
        where = "" if batch_id is None else " (micro-batch %d)" % batch_id
        if what == "committed":
            log.info("pyprod.spark: committed %d records from %d tasks to %s%s",
                     records, tasks, self._settings.describe(), where)
        else:
            log.warning("pyprod.spark: aborted; %d of %d tasks reported success (%d records, "
                        "which stay in Kafka: a Kafka sink cannot roll back) writing to %s%s",
                        ok_tasks, tasks, records, self._settings.describe(), where)
        return self.last_commit


class _Writer(_Report):
    def __init__(self, settings):
        self._settings = settings

    def commit(self, messages):
        self._report(messages, "committed")

    def abort(self, messages):
        self._report(messages, "aborted")


class _StreamWriter(_Report):
    def __init__(self, settings):
        self._settings = settings

    def commit(self, messages, batchId):
        self._report(messages, "committed", batchId)

    def abort(self, messages, batchId):
        self._report(messages, "aborted", batchId)


def _write_arrow(self, iterator):
    return PyprodCommitMessage(task_writer.write_arrow(self._settings, iterator))


def _write_rows(self, iterator):
    return PyprodCommitMessage(task_writer.write_rows(self._settings, iterator))


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
        topic, configs = sink_options.parse(self.options, streaming=streaming)
        return task_writer.settings_for(schema, topic, configs)

    def writer(self, schema, overwrite):
        return PyprodWriter(self._settings(schema, overwrite, streaming=False))

    def streamWriter(self, schema, overwrite):
        return PyprodStreamWriter(self._settings(schema, overwrite, streaming=True))
