"""Closing a PySpark worker's cached producers when its executor shuts down.

A Python worker forked by PySpark's daemon never runs atexit. It leaves in one of three ways:
- ``pyspark.worker.main`` ends with SystemExit(-1): a task failed, or the executor closed the
  worker's socket (it stops, or drops idle workers); the daemon's child loop then calls
  os._exit();
- without worker reuse (spark.python.worker.reuse=false), after every task, the same way;
- the daemon is stopped, or sees its stdin close (the executor JVM was lost), and sends SIGHUP
  to its process group, which kills the workers (their handler is SIG_DFL).
So, in such a worker, the first producer the cache creates also installs two hooks:
- ``pyspark.worker.main`` (which the daemon imports for every task) is wrapped to close the
  cache's producers when the worker is about to leave;
- SIGHUP is blocked in the main thread (the worker resets its handler before every task, but
  not the mask) and so in every thread started after it, and a daemon thread waits for it
  with sigwait(); on SIGHUP it closes the producers, then lets the SIGHUP kill the process.
Either way the close is bounded by CLOSE_TIMEOUT_S and logs one line of counts at INFO on the
"pyprod.spark" logger (configure a handler to keep it: by then the executor JVM, which copies
the workers' stderr into its log, may be gone).

Threads that existed before the first producer keep SIGHUP unblocked; the kernel may hand the
signal to one of them, and the worker then dies as it did without this.
"""
from __future__ import annotations

import logging
import os
import signal
import threading

CLOSE_TIMEOUT_S = 5.0
WORKER_ENV = "PYTHON_WORKER_FACTORY_SECRET"   # set by PySpark in its Python workers only
REUSE_ENV = "SPARK_REUSE_WORKER"               # set when spark.python.worker.reuse is on

_installed_pid = None
log = logging.getLogger("pyprod.spark")


def in_pyspark_worker():
    return WORKER_ENV in os.environ and hasattr(signal, "pthread_sigmask")


def close_on_shutdown(cache):
    """Install the SIGHUP watcher for ``cache`` in this process (once; main thread only)."""
    global _installed_pid
    if _installed_pid == os.getpid() or not in_pyspark_worker() \
            or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL:  # SIGHUP would not kill
        return False
    _installed_pid = os.getpid()
    _wrap_worker_main(cache)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    threading.Thread(target=_watch, args=(cache,), name="pyprod-spark-shutdown",
                     daemon=True).start()
    return True


def _wrap_worker_main(cache):
    try:
        import pyspark.worker as worker
    except ImportError:  # pragma: no cover - only called in PySpark workers
        return
    main = worker.main
    if getattr(main, "_pyprod_wrapped", False):
        return

    def wrapped(infile, outfile):
        try:
            out = main(infile, outfile)
        except SystemExit as e:  # the daemon lets the worker go unless the code is 0
            if e.code not in (0, None):
                close_all(cache, "the worker leaves")
            raise
        except BaseException:
            close_all(cache, "the worker leaves")
            raise
        if not os.environ.get(REUSE_ENV):
            close_all(cache, "the worker is not reused")
        return out

    wrapped._pyprod_wrapped = True
    worker.main = wrapped


def close_all(cache, why):
    """Close the cache's producers and log the counts."""
    before = cache.stats()
    cache.close_all(timeout=CLOSE_TIMEOUT_S)
    after = cache.stats()
    log.info("pyprod.spark: Python worker %d: executor shutdown (%s): closed %d producers "
             "(created %d, acquired %d, closed %d since the worker started)", os.getpid(), why,
             after["closed"] - before["closed"], after["created"], after["acquired"],
             after["closed"])
    for handler in log.handlers + logging.getLogger().handlers:
        handler.flush()


def _watch(cache):
    signal.sigwait({signal.SIGHUP})
    try:
        close_all(cache, "SIGHUP")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
        signal.pthread_kill(threading.get_ident(), signal.SIGHUP)
        os._exit(128 + signal.SIGHUP)  # SIGHUP was handled elsewhere: leave all the same
