"""A bounded wait on a condition, for tests: it polls, and fails saying what it waited for.
A bound, never a timing assertion."""
import time

__all__ = ["wait_until"]


def wait_until(check, what: str, timeout: float = 60.0, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "%s: not within %g s" % (what, timeout)
        time.sleep(every)
