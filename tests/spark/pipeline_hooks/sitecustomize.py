"""Crash points for tests/spark/pipeline_driver.py, installed in every Python process of its
Spark application: the driver puts this folder first on PYTHONPATH, so the Python workers the
JVM launches (the tasks' workers and the sink-commit runner) import it at start-up. Inert
unless PYPROD_PIPELINE_DIE is set:

    task:<batch>            a task of micro-batch <batch>, once its rows are flushed and its
                            transaction prepared (open, unfinished): mid-stream, mid-transaction
    decision:<batch>        the sink's commit of <batch>, right after its decision entry
                            ("committing") is written, before any EndTxn
    half:<batch>            the same, after the first of the batch's transactions is committed

The crash is the whole driver's: SIGKILL to its process group (the driver's Python, the JVM,
every Python worker), PYPROD_PIPELINE_PGID. Wrapping pyprod.spark.transactions here is the
test hook: the product has none."""
import os
import signal

_DIE = os.environ.get("PYPROD_PIPELINE_DIE")


def _crash(where):
    with open("/proc/%d/comm" % os.getppid()) as f:
        parent = f.read().strip()
    with open(os.environ["PYPROD_PIPELINE_MARK"], "a") as f:  # the test checks where it died
        f.write("%s (pid %d, parent %d %s)\n" % (where, os.getpid(), os.getppid(), parent))
        f.flush()
        os.fsync(f.fileno())
    os.killpg(int(os.environ["PYPROD_PIPELINE_PGID"]), signal.SIGKILL)
    os._exit(137)  # not reached


def _install(point, batch):
    from pyprod.spark import transactions as t

    if point == "task":
        write = t.write

        def write_then_die(settings, sends, tid, factory=None):
            out = write(settings, sends, tid, factory)
            from pyspark import TaskContext
            ctx = TaskContext.get()
            if out[1] is not None and ctx.getLocalProperty(t.BATCH_ID_PROPERTY) == str(batch):
                _crash("task %d %s %d records" % (batch, tid, out[0]))
            return out
        t.write = write_then_die
        return

    put, commit_all = t.SinkLog.put, t._commit_all

    def put_then_die(self, entry):
        put(self, entry)
        if point == "decision" and entry["batch_id"] == batch and entry["state"] == t.COMMITTING:
            _crash("decision %d" % batch)
    t.SinkLog.put = put_then_die

    def commit_first_then_die(settings, prepared, factory):
        prepared = list(prepared)
        if point != "half" or not prepared or not _deciding(batch):
            return commit_all(settings, prepared, factory)
        commit_all(settings, prepared[:1], factory)
        _crash("half %d %s" % (batch, prepared[0].transactional_id))
    t._commit_all = commit_first_then_die


def _deciding(batch):
    """Whether _commit_all's caller is commit_stream's first commit of ``batch`` (not a
    re-run's, not recover())."""
    import sys
    caller = sys._getframe(2)  # 0: _deciding, 1: commit_first_then_die
    return caller.f_code.co_name == "commit_stream" and caller.f_locals.get("batch_id") == batch


if _DIE:
    _point, _batch = _DIE.split(":")
    _install(_point, int(_batch))
