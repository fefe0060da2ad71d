"""Exactly-once writes (option ``exactlyOnce``): each task writes in a Kafka transaction of its
own and hands it over unfinished; the driver commits them all, or aborts them. Readers see the
rows only with isolation_level=read_committed.

Transactional ids. They never contain the attempt number: a task's retry (or a speculative
copy) reuses the id, and its InitProducerId fences the earlier attempt, aborting whatever that
attempt left open, so a failed attempt's rows are never committed.

  batch      <prefix>-<run>-<partition>        run: 16 hex digits drawn when Spark plans the
                                               write (the writer Spark pickles for the tasks
                                               and for commit()/abort() carries it)
  streaming  <prefix>-<query id>-<partition>   the query id is kept in the checkpoint, so the
                                               ids survive restarts: a restarted query's tasks
                                               fence what a crashed run left open at once

The task (executor): on its first record, ``KafkaProducer(transactional_id=...)``,
init_transactions(), begin_transaction(); then send_batch() calls, flush(),
prepare_transaction() and close(), which leaves the transaction open. Its commit message
carries the PreparedTransaction (transactional id, producer id, epoch and transaction version:
under transactions v2 the epoch the broker expects in EndTxn, under v1 the one it fences
with). A task that writes nothing opens no transaction.

The driver, batch write: commit(messages) resumes each prepared transaction
(resume_transaction) and commits it, 8 at a time. abort(messages) aborts them and fences every
partition's id (InitProducerId aborts what any attempt of it left open). Kafka cannot commit
several transactions atomically (without KIP-939): the commit is atomic per task, so a
commit() that fails half-way leaves the tasks it committed visible, and says so.

Zombie tasks (batch): an attempt still running after the driver committed or aborted (a slow
or cut-off executor; Spark ignores its result) must not hold back read_committed readers until
transaction_timeout_ms. Before it commits or aborts, the driver marks the run closed:
InitProducerId on the sentinel id ``<prefix>-<run>-closed``. A task asks for that id
(DescribeTransactions, Kafka 3.0+) on its first record, before its InitProducerId (an attempt
starting after the mark then neither writes nor fences the transactions being committed), and
again after its flush; if it exists, the task aborts what it wrote and raises JobEndedError. An
attempt whose InitProducerId came before the driver's fences is aborted by them; one whose
InitProducerId came later asked after the mark, at the latest after its flush. So the LSO is
held back at most until the driver's fences, or until the attempt's flush plus one round trip
(the attempt raced the mark, or the driver died after it), not transaction_timeout_ms. Without
DescribeTransactions, or if the mark failed (logged), a late attempt's transaction stays open
until transaction_timeout_ms, as before.

Zombie tasks (streaming): no mark (it would be one more id per micro-batch). The ids are reused
per partition, so the next micro-batch's attempt of the partition (or the restarted query's)
fences a zombie of the previous one, and abort(messages, batchId) fences the failed partitions:
a zombie holds the LSO back until the partition's next micro-batch that writes rows, and until
transaction_timeout_ms if the query stops for good.

The driver, streaming: commit(messages, batchId) first records its decision -- the batch id
and every prepared transaction -- in ``<checkpointLocation>/pyprod/<batchId>.json`` (state
"committing"), then commits the transactions, then marks the entry "committed". Spark writes
its own commit log (commits/<batchId>) only after commit() returns, so a crash in between makes
the restarted query run that batch id again. Hence:

- Before any task of a micro-batch runs, Spark plans it, calling streamWriter() on the driver;
  there an entry still "committing" (a crash during commit()) is finished: each of its
  transactions is committed again (the coordinator answers a repeated EndTxn(COMMIT) of a
  committed transaction with success) or found gone (aborted by the broker after
  transaction_timeout_ms), and the entry is marked "committed" with the gone ids as "lost".
  This must come before the re-run's tasks, whose InitProducerId (same ids) would fence them.
- commit(messages, batchId) of a batch id that has an entry: its rows are committed already.
  The re-run's transactions are aborted, except those of lost ids, which are committed: the
  re-run wrote those partitions again (the same rows when the plan is deterministic, which
  Spark's replay assumes).
- A crash before the entry is written: nothing of the batch was committed. The re-run's tasks
  fence the old transactions (same ids) and the batch is written once.
- abort(messages, batchId) leaves a decided batch (an entry exists) to that recovery; otherwise
  it aborts the transactions and fences the failed partitions' ids.

The entries (pyprod.spark.sink_log) need a checkpoint the driver's Python can read and write:
a local (or NFS) path, a file: URI, or a URI pyarrow.fs opens (s3://, gs://, hdfs://, abfs://).

Where each part is: the ids and the settings in pyprod.spark.transactional_ids, the task side
(write, the run-closed check) in pyprod.spark.task_transaction, the entries' store in
pyprod.spark.sink_log; this module is the driver's side (finish, fence, commit and abort).
"""
from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from pyprod import errors
from pyprod.spark.sink_log import (ENTRY_DIR, KEEP_ENTRIES, ExactlyOnceError,  # noqa: F401
                                   SinkLog, _Files)
# the tasks' side and the ids, for pyprod.spark.datasource (and the tests) as before
from pyprod.spark.task_transaction import JobEndedError, _no_describe, write  # noqa: F401
from pyprod.spark.transactional_ids import (  # noqa: F401
    BATCH_ID_PROPERTY, CLOSE_TIMEOUT_S, QUERY_ID_PROPERTY, TaskTransaction, TransactionSettings,
    closed_id, config_for, current_task, for_batch, for_stream, log, new_producer,
    transactional_id)
from pyprod.transaction_manager import PreparedTransaction

ENTRY_VERSION = 1
PARALLEL = 8                # transactions finished at once by the driver
COMMITTING, COMMITTED = "committing", "committed"

# EndTxn of a transaction the broker no longer has open: aborted after transaction_timeout_ms
# (v1: fenced, v2: invalid state) or fenced by a newer InitProducerId of its id.
_GONE = (errors.ProducerFencedError, errors.InvalidProducerEpochError,
         errors.InvalidTxnStateError, errors.InvalidProducerIdMappingError,
         errors.UnknownProducerIdError)


# -- the driver: finishing transactions --------------------------------------------------------
def finish(configs, prepared, commit, factory=None):
    """Commit (or abort) the prepared transaction from a producer of its transactional id."""
    producer = (factory or new_producer)(config_for(configs, prepared.transactional_id))
    try:
        producer.resume_transaction(prepared)
        (producer.commit_transaction if commit else producer.abort_transaction)()
    finally:
        producer.close(timeout=CLOSE_TIMEOUT_S)


def fence(configs, tid, factory=None):
    """InitProducerId on ``tid``: aborts what an attempt of it left open."""
    producer = (factory or new_producer)(config_for(configs, tid))
    try:
        producer.init_transactions()
    finally:
        producer.close(timeout=CLOSE_TIMEOUT_S)


def _parallel(fn, items):
    """[(item, exception or None)] of fn(item) for each item, PARALLEL at a time."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(items)),
                            thread_name_prefix="pyprod-spark-txn") as pool:
        futures = [(item, pool.submit(fn, item)) for item in items]
        out = []
        for item, future in futures:
            try:
                future.result()
                out.append((item, None))
            except Exception as e:  # noqa: BLE001 - reported by the caller
                out.append((item, e))
        return out


def _commit_all(settings, prepared, factory):
    return _parallel(lambda p: finish(settings.configs, p, True, factory), prepared)


def _abort_all(settings, prepared, factory, what):
    """Abort ``prepared`` (best effort: a failure is logged); how many were aborted."""
    done = 0
    for p, e in _parallel(lambda p: finish(settings.configs, p, False, factory), prepared):
        if e is None:
            done += 1
        else:
            log.warning("pyprod.spark: could not abort %s's transaction %s (producer id %d, "
                        "epoch %d): %r", what, p.transactional_id, p.producer_id,
                        p.producer_epoch, e)
    return done


def _fence_all(settings, tids, factory):
    """InitProducerId on each of ``tids`` (best effort: a failure is logged); the ids fenced."""
    done = []
    for tid, e in _parallel(lambda t: fence(settings.configs, t, factory), tids):
        if e is None:
            done.append(tid)
        else:
            log.warning("pyprod.spark: could not fence transactional id %s (what its failed "
                        "task left open stays so until transaction_timeout_ms): %r", tid, e)
    return done


def prepared_of(messages):
    return [m.transaction for m in messages
            if m is not None and getattr(m, "transaction", None) is not None]


def _timeout_hint(settings):
    return ("a transaction the broker no longer has open was aborted after "
            "transaction_timeout_ms=%s (option kafka.transaction.timeout.ms, capped by the "
            "broker's transaction.max.timeout.ms: the write must commit within it) or fenced by "
            "another writer of its transactional id (keep spark.speculation off, use one "
            "transactionalIdPrefix per concurrent job)"
            % (settings.configs.get("transaction_timeout_ms"),))


def _failures(failed, limit=5):
    shown = "; ".join("%s: %s: %s" % (p.transactional_id, type(e).__name__, e)
                      for p, e in failed[:limit])
    more = len(failed) - limit
    return shown + (" (and %d more)" % more if more > 0 else "")


def _check_scope(messages, expected, what):
    for m in messages:
        scope = getattr(m, "scope", None) if m is not None else None
        if scope is not None and scope != expected:
            raise ExactlyOnceError(
                "pyprod.spark: a task wrote for %s %r, this commit is for %r: %s"
                % (what, scope, expected,
                   "the driver reads another checkpoint than Spark's (give "
                   "checkpointLocation as a full URI)" if what == "query" else
                   "Spark planned the write twice"))


def close_run(settings, factory=None):
    """Mark the batch write closed (InitProducerId on its sentinel id), before the driver
    commits or aborts anything. Best effort: without it, a late zombie's transaction holds
    back read_committed readers until transaction_timeout_ms. Whether it was marked."""
    tid = closed_id(settings.transactions)
    try:
        fence(settings.configs, tid, factory)
        return True
    except Exception as e:  # noqa: BLE001 - the write's outcome does not depend on it
        log.warning("pyprod.spark: could not mark the write closed (InitProducerId on %s): "
                    "a task still running now leaves its transaction open until "
                    "transaction_timeout_ms: %r", tid, e)
        return False


def commit_batch(settings, messages, factory=None):
    """commit(messages) of a batch write: commit every task's transaction. Returns counts."""
    txn = settings.transactions
    _check_scope(messages, txn.run_id, "write")
    prepared = prepared_of(messages)
    # first: a task attempt still running finds the write ended (and aborts its own rows)
    closed = close_run(settings, factory) if prepared else False
    failed = [(p, e) for p, e in _commit_all(settings, prepared, factory) if e is not None]
    if failed:
        gone = any(isinstance(e, _GONE) for _, e in failed)
        raise ExactlyOnceError(
            "pyprod.spark: %d of %d transactions failed to commit (%s); the other %d are "
            "committed and their rows visible%s" % (
                len(failed), len(prepared), _failures(failed), len(prepared) - len(failed),
                ": " + _timeout_hint(settings) if gone else ""))
    return {"transactions": len(prepared), "committed": len(prepared), "run_closed": closed}


def abort_batch(settings, messages, factory=None):
    """abort(messages) of a batch write (messages[i] is partition i's, None if it failed):
    mark the run closed, abort the tasks' transactions, then fence every partition's
    transactional id: a failed partition's leftovers, and any attempt of a reported one that
    began before the mark (a later one finds the run closed and aborts itself)."""
    txn = settings.transactions
    prepared = prepared_of(messages)
    failed = {transactional_id(txn.prefix, txn.run_id, i)
              for i, m in enumerate(messages) if m is None}
    closed = close_run(settings, factory)
    aborted = _abort_all(settings, prepared, factory, "a task")
    fenced = _fence_all(settings, [transactional_id(txn.prefix, txn.run_id, i)
                                   for i in range(len(messages))], factory)
    n_failed = sum(1 for tid in fenced if tid in failed)
    return {"transactions": len(prepared), "aborted": aborted, "fenced": n_failed,
            "fenced_reported": len(fenced) - n_failed, "run_closed": closed}


# -- the driver: streaming ---------------------------------------------------------------------
def _prepared(entry):
    return [PreparedTransaction(*t) for t in entry["transactions"]]


def _finish_entry(settings, sink_log, entry, factory, trusted):
    """Commit the transactions of a 'committing' entry again; mark it 'committed', with the
    ids whose transaction is gone as 'lost' (``trusted``: nothing re-used the ids since the
    crash) or 'unknown' (the re-run's tasks fenced them: lost or committed, who knows)."""
    batch_id = entry["batch_id"]
    gone, failed = [], []
    for p, e in _commit_all(settings, _prepared(entry), factory):
        if e is None:
            continue
        (gone if isinstance(e, _GONE) else failed).append((p, e))
    if failed:
        raise ExactlyOnceError(
            "pyprod.spark: could not finish committing micro-batch %d, decided by an earlier "
            "run (%s); the next attempt retries (its entry: %s)" % (
                batch_id, _failures(failed), sink_log.entry_path(batch_id)))
    key = "lost" if trusted else "unknown"
    ids = sorted(set(entry.get(key, ())) | {p.transactional_id for p, _ in gone})
    entry = dict(entry, state=COMMITTED, **{key: ids})
    sink_log.put(entry)
    if gone and trusted:
        log.error("pyprod.spark: micro-batch %d: the transactions of %s were gone when the "
                  "restarted query finished the batch's commit (%s); their partitions are "
                  "written again from the batch's re-run", batch_id,
                  ", ".join(p.transactional_id for p, _ in gone), _timeout_hint(settings))
    elif gone:
        log.error("pyprod.spark: micro-batch %d: the transactions of %s could not be finished "
                  "before the batch's re-run fenced them: their rows are committed or lost "
                  "(%s)", batch_id, ", ".join(p.transactional_id for p, _ in gone),
                  _timeout_hint(settings))
    else:
        log.info("pyprod.spark: finished committing micro-batch %d (%d transactions), left "
                 "half-committed by an earlier run", batch_id, len(entry["transactions"]))
    return entry


def in_commit_runner():
    """Whether Spark's streaming sink commit runner (python_streaming_sink_runner, which calls
    streamWriter() after the tasks ran) is calling us."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("python_streaming_sink_runner.py"):
            return True
        frame = frame.f_back
    return False


def recover(settings, factory=None):
    """At planning, before the micro-batch's tasks: finish the newest entry if a crash left it
    'committing'. Returns the finished entry, or None."""
    sink_log = SinkLog(settings.transactions.checkpoint)
    entry = sink_log.latest()
    if entry is None or entry.get("state") != COMMITTING:
        return None
    return _finish_entry(settings, sink_log, entry, factory, trusted=True)


def commit_stream(settings, messages, batch_id, factory=None):
    """commit(messages, batchId): see the module doc. Returns counts (and 'already_committed'
    for the re-run of a committed batch)."""
    txn = settings.transactions
    sink_log = SinkLog(txn.checkpoint)
    _check_scope(messages, txn.query_id, "query")
    prepared = prepared_of(messages)
    entry = sink_log.get(batch_id)
    if entry is not None:
        return _commit_rerun(settings, sink_log, entry, messages, prepared, factory)
    if not prepared:
        return {"transactions": 0, "committed": 0}
    entry = {"version": ENTRY_VERSION, "batch_id": batch_id, "query_id": txn.query_id,
             "state": COMMITTING, "transactions": [list(p) for p in prepared]}
    sink_log.put(entry)  # the decision: from here on the batch is committed, whatever happens
    failed = [(p, e) for p, e in _commit_all(settings, prepared, factory) if e is not None]
    if failed:
        raise ExactlyOnceError(
            "pyprod.spark: micro-batch %d: %d of %d transactions failed to commit (%s); the "
            "batch stays decided: the restarted query commits it again before its next tasks%s"
            % (batch_id, len(failed), len(prepared), _failures(failed),
               " (" + _timeout_hint(settings) + ")"
               if any(isinstance(e, _GONE) for _, e in failed) else ""))
    sink_log.put(dict(entry, state=COMMITTED))
    sink_log.prune()
    return {"transactions": len(prepared), "committed": len(prepared)}


def _commit_rerun(settings, sink_log, entry, messages, prepared, factory):
    """The re-run of a batch an earlier run committed: abort its transactions, but commit
    those of partitions whose earlier transaction was lost."""
    batch_id = entry["batch_id"]
    if entry.get("state") == COMMITTING:  # not finished at planning, as it should have been
        entry = _finish_entry(settings, sink_log, entry, factory, trusted=False)
    lost = set(entry.get("lost", ()))
    redo = [p for p in prepared if p.transactional_id in lost]
    drop = [p for p in prepared if p.transactional_id not in lost]
    aborted = _abort_all(settings, drop, factory, "the re-run")
    failed = [(p, e) for p, e in _commit_all(settings, redo, factory) if e is not None]
    rewritten = {p.transactional_id for p in redo} - {p.transactional_id for p, _ in failed}
    records = sum(m.records for m in messages
                  if m is not None and m.transaction is not None
                  and m.transaction.transactional_id in rewritten)
    if rewritten:
        entry = dict(entry, lost=sorted(lost - rewritten),
                     rewritten=sorted(set(entry.get("rewritten", ())) | rewritten))
        sink_log.put(entry)
    if failed:
        raise ExactlyOnceError(
            "pyprod.spark: micro-batch %d: could not commit the re-run's rows of lost "
            "partitions (%s)" % (batch_id, _failures(failed)))
    if lost - rewritten:
        log.error("pyprod.spark: micro-batch %d: the rows of %s are lost (their transaction "
                  "was aborted and the re-run did not write them)", batch_id,
                  ", ".join(sorted(lost - rewritten)))
    return {"transactions": len(prepared), "committed": len(rewritten), "aborted": aborted,
            "already_committed": True, "records_committed": records}


def abort_stream(settings, messages, batch_id, factory=None):
    """abort(messages, batchId): see the module doc."""
    txn = settings.transactions
    prepared = prepared_of(messages)
    entry = SinkLog(txn.checkpoint).get(batch_id)
    if entry is not None:
        decided = {tuple(t) for t in entry["transactions"]}
        left = [p for p in prepared if tuple(p) in decided]
        prepared = [p for p in prepared if tuple(p) not in decided]
        if left:
            log.warning("pyprod.spark: micro-batch %d: %d transactions are left for the "
                        "restarted query to commit (the batch was decided before it failed)",
                        batch_id, len(left))
    aborted = _abort_all(settings, prepared, factory, "a task")
    tids = [] if entry is not None else [
        transactional_id(txn.prefix, txn.query_id, i) for i, m in enumerate(messages)
        if m is None]
    fenced = len(_fence_all(settings, tids, factory))
    return {"transactions": len(prepared), "aborted": aborted, "fenced": fenced}
