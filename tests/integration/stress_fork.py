"""The fork in a stress round (stress_round.py): a process whose threads are busy with one
KafkaProducer forks, and the forked child must get IllegalStateError from send(), send_batch()
and flush(), and return from metrics() and close(), within a guard."""
import os
import select
import signal
import time

from stress_check import FORK_TID, make_value


def fork_check(producer, topic, guard):
    """fork(); the child's answers come back through a pipe. What went wrong, as strings."""
    from pyprod.errors import IllegalStateError

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked child: never returns
        try:
            os.close(rfd)
            _in_forked_child(producer, topic, wfd, guard, IllegalStateError)
        finally:
            os._exit(70)
    os.close(wfd)
    got, deadline = b"", time.monotonic() + guard
    while time.monotonic() < deadline:
        if not select.select([rfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        chunk = os.read(rfd, 4096)
        if not chunk:
            break
        got += chunk
    os.close(rfd)
    status = _reap(pid, deadline + 5)
    steps = got.decode().split("\n")  # "name: result"; the last one unfinished if it hung
    bad = [s for s in steps[:-1] if not s.endswith(": ok")]
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        how = (f"killed by {signal.Signals(os.WTERMSIG(status)).name}" if
               os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}")
        where = f"in {steps[-1].rstrip(': ')}" if steps[-1] else "after its last step"
        bad.append(f"{how} {where} (hang guard {guard} s)")
    return bad


def _reap(pid, deadline):
    """pid's exit status; past the deadline SIGABRT (faulthandler prints its stack)."""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGABRT)
    return os.waitpid(pid, 0)[1]


def _in_forked_child(p, topic, wfd, guard, refused):
    signal.alarm(guard * 3)  # the last resort if nobody is left to kill it

    def step(name, fn, want):
        os.write(wfd, name.encode() + b": ")
        try:
            fn()
            res = "ok" if want is None else f"returned instead of raising {want.__name__}"
        except BaseException as e:  # noqa: BLE001 - reported
            res = "ok" if want and isinstance(e, want) else f"raised {type(e).__name__}: {e}"
        os.write(wfd, res.encode() + b"\n")

    value = make_value(FORK_TID, 0, b"from the forked child")
    step("send()", lambda: p.send(topic, value), refused)
    step("send_batch()", lambda: p.send_batch(topic, [value]), refused)
    step("flush()", p.flush, refused)
    step("metrics()", p.metrics, None)
    step("close()", p.close, None)
    os._exit(0)
