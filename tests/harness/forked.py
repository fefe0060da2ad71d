"""Run a function in an os.fork() child, under a hang guard, and fail with the child's traceback
(the fork tests: tests/producer/test_fork_unit.py, tests/integration/test_fork_roundtrip.py)."""
import os
import signal
import time
import traceback

__all__ = ["run_forked"]


def run_forked(fn, guard=30.0):
    """Fork; the child runs fn() and leaves with os._exit (0 if fn returned). Returns once the
    child is gone; AssertionError naming what went wrong in it (SIGALRM kills a hung child)."""
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
