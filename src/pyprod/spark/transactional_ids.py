"""Exactly-once writes' transactional ids (see pyprod.spark.transactions for the design):
``<prefix>-<run>-<partition>`` for a batch write, ``<prefix>-<query id>-<partition>`` for a
streaming query, ``<prefix>-<run>-closed`` for a batch write's run-closed sentinel; the
settings the tasks and the driver share, the running task's id, and a producer of an id."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Optional

from pyprod.errors import KafkaConfigurationError
from pyprod.producer import KafkaProducer
from pyprod.spark.sink_log import SinkLog
from pyprod.spark.stores import materialize  # PKCS12 stores -> PEM files

log = logging.getLogger("pyprod.spark.commit")  # the tasks' and the driver's
if log.level == logging.NOTSET:
    log.setLevel(logging.INFO)

CLOSE_TIMEOUT_S = 30.0
QUERY_ID_PROPERTY = "sql.streaming.queryId"    # Spark's task-local properties
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class TransactionSettings:
    """What the tasks and the driver need for exactly-once writes (picklable)."""
    prefix: str
    run_id: Optional[str] = None       # batch writes
    checkpoint: Optional[str] = None   # streaming: the checkpointLocation option
    query_id: Optional[str] = None     # streaming: the id in the checkpoint's metadata

    @property
    def streaming(self):
        return self.run_id is None


def transactional_id(prefix, scope, partition):
    return "%s-%s-%d" % (prefix, scope, partition)


def for_batch(prefix):
    return TransactionSettings(prefix, run_id=uuid.uuid4().hex[:16])


def for_stream(prefix, checkpoint):
    """Streaming settings; fails unless the checkpoint's metadata can be read from here."""
    if not checkpoint:
        raise KafkaConfigurationError(
            "option 'exactlyOnce' on a streaming query needs its checkpoint as the option "
            "'checkpointLocation' (.option('checkpointLocation', ...)): pyprod keeps its "
            "commit decisions there")
    return TransactionSettings(prefix, checkpoint=checkpoint,
                               query_id=SinkLog(checkpoint).query_id())


@dataclass(frozen=True)
class TaskTransaction:
    transactional_id: str
    partition: int
    scope: str                 # the run id (batch) or the query id (streaming)
    batch_id: Optional[int]    # streaming: the micro-batch


def current_task(txn: TransactionSettings, context=None):
    """The running Spark task's transactional id (TaskContext: partition, and the query and
    micro-batch ids Spark sets as local properties of a streaming query's jobs)."""
    if context is None:
        from pyspark import TaskContext
        context = TaskContext.get()
    if context is None:
        raise RuntimeError("exactly-once writes run inside Spark tasks")
    partition = context.partitionId()
    batch_id = None
    if txn.streaming:
        scope = context.getLocalProperty(QUERY_ID_PROPERTY) or txn.query_id
        batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        batch_id = None if batch is None else int(batch)
    else:
        scope = txn.run_id
    return TaskTransaction(transactional_id(txn.prefix, scope, partition), partition, scope,
                           batch_id)


def closed_id(txn):
    """The batch write's sentinel transactional id: it exists once the driver has closed the
    run (commit or abort)."""
    return "%s-%s-closed" % (txn.prefix, txn.run_id)


def new_producer(config):
    return KafkaProducer(**materialize(config))


def config_for(configs, tid):
    return dict(configs, transactional_id=tid)
