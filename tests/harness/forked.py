"""Run a function in an os.fork() child, under a hang guard, and fail with the child's traceback
(the fork tests: tests/producer/test_fork_unit.py, tests/integration/test_fork_roundtrip.py).

A test about fork itself is marked ``@needs_fork`` (skipped where there is no os.fork: Windows);
a test that forks only so that a crash fails it alone calls ``run_isolated``."""
import faulthandler
import os
import signal
import sys
import time
import traceback

import pytest

__all__ = ["needs_fork", "run_forked", "run_isolated", "run_stress"]

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"),
                                reason="needs os.fork (this platform has none: Windows)")


def run_isolated(fn, guard=30.0):
    """``run_forked(fn, guard)`` where there is os.fork; elsewhere fn() in this process (no
    crash isolation nor hang guard there)."""
    if hasattr(os, "fork"):
        run_forked(fn, guard)
    else:
        fn()


def run_stress(fn, deadline_s, isolate):
    """A many-thread stress test's body: fn() here, or (isolate: free-threaded builds, where a
    race may crash the process) in an isolated child, whose hang past 3 x deadline_s dumps
    every thread's stack before the child exits."""
    if not isolate:
        return fn()

    def child():
        faulthandler.dump_traceback_later(deadline_s * 3 - 5, exit=True, file=sys.__stderr__)
        fn()
    run_isolated(child, guard=deadline_s * 3)


def run_forked(fn, guard=30.0):
    """Fork; the child runs fn() and leaves with os._exit (0 if fn returned). Returns once the
    child is gone; AssertionError naming what went wrong in it (SIGALRM kills a hung child).
    Its tests are marked ``needs_fork``."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(rfd)
            signal.alarm(int(guard) + 1)
            fn()
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent
            os.write(wfd, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        out = r.read().decode(errors="replace")  # EOF: the child exited (or was killed)
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            status = os.waitpid(pid, 0)[1]
            break
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        raise AssertionError("the forked child died of %s (hang guard %s s)\n%s" % (
            signal.Signals(os.WTERMSIG(status)).name, guard, out))
    if os.WEXITSTATUS(status) != 0:
        raise AssertionError("the forked child failed:\n" + out)
