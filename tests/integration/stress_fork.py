"""The fork in a stress round (stress_round.py): a process whose threads are busy with one
KafkaProducer forks, and the forked child must use it (docs/fork.md): send(), send_batch(),
flush(), metrics() and close() return within a guard; stress_check.py finds its records once."""
import os
import select
import signal
import time

from stress_check import FORK_TID, make_value


def fork_check(producer, topic, guard):
    """fork(); the child's answers come back through a pipe. What went wrong, as strings."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked child: never returns
        try:
            os.close(rfd)
            _in_forked_child(producer, topic, wfd, guard)
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


def _in_forked_child(p, topic, wfd, guard):
    signal.alarm(guard * 3)  # the last resort if nobody is left to kill it

    def step(name, fn):
        os.write(wfd, name.encode() + b": ")
        try:
            fn()
            res = "ok"
        except BaseException as e:  # noqa: BLE001 - reported
            res = f"raised {type(e).__name__}: {e}"
        os.write(wfd, res.encode() + b"\n")

    sent = []
    step("send()", lambda: sent.append(p.send(topic, make_value(FORK_TID, 0, b"child"))))
    step("send_batch()", lambda: sent.append(
        p.send_batch(topic, [make_value(FORK_TID, 1, b"child")])))
    step("flush()", lambda: p.flush(guard))
    step("delivered", lambda: [f.get(0) for f in sent])
    step("metrics()", p.metrics)
    step("close()", lambda: p.close(guard))
    os._exit(0)
