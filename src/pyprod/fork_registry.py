"""The producers of this process, for its exit and its forks (docs/fork.md).

At interpreter exit, and at the end of a multiprocessing fork or forkserver child (which ends
with os._exit, past atexit), every open producer is closed (flushed). At a fork, each built
producer's metrics lock is taken (its Sender samples under it: the child's copy is whole); in
the child each producer closes its copies of the parent's sockets at once (nothing is sent)
and the producers rebuild their parts on first use, one at a time (``rebuild_lock``).
"""
import atexit
import logging
import os
import sys
import threading
import weakref

log = logging.getLogger(__name__)

_open = weakref.WeakSet()  # producers not closed yet: closed at exit
# every producer with parts (closed ones too) -> (its metrics lock, close its sockets)
_parts = weakref.WeakKeyDictionary()
_held = []  # locks _before_fork took
_finalizer_pid = None  # the process that registered _close_all_at_exit with multiprocessing
rebuild_lock = threading.Lock()  # a forked child's first uses (made anew in each child)


def opened(producer):
    """producer is open: close() it at exit."""
    _open.add(producer)


def closed(producer):
    _open.discard(producer)


def built(producer, metrics_lock, close_sockets):
    """producer has (new) parts: take metrics_lock at a fork, call close_sockets() in the
    child; and close it at the end of this process if it is a multiprocessing child."""
    _parts[producer] = (metrics_lock, close_sockets)
    _close_at_process_exit()


@atexit.register
def _close_all_at_exit():
    for producer in list(_open):
        producer.close()


def _before_fork():
    for lock, _ in list(_parts.values()):
        if lock is not None:
            lock.acquire()
            _held.append(lock)


def _after_fork_in_parent():
    while _held:
        _held.pop().release()


def _after_fork_in_child():
    """Every forked child, on its one thread: each producer closes its copies of the parent's
    sockets now (a connection the parent closes must not stay open here)."""
    global rebuild_lock
    rebuild_lock = threading.Lock()
    _after_fork_in_parent()  # the same thread holds them here
    for producer, (_, close_sockets) in list(_parts.items()):
        try:
            close_sockets()
        except Exception:  # noqa: BLE001 - the child goes on; its copies close at exit
            log.warning("%r: closing the parent's sockets in a forked child failed", producer,
                        exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _close_at_process_exit():
    """multiprocessing's fork and forkserver children end with os._exit, past atexit: close
    (flush) the producers there too, as at interpreter exit."""
    global _finalizer_pid
    mp = sys.modules.get("multiprocessing")
    if mp is None or _finalizer_pid == os.getpid() or mp.parent_process() is None:
        return
    import multiprocessing.util
    _finalizer_pid = os.getpid()
    multiprocessing.util.Finalize(None, _close_all_at_exit, exitpriority=0)
