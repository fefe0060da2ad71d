"""The broker's child processes: free ports on 127.0.0.1, a child that dies with this process,
and stopping one (its whole process group). Every running broker joins ``live`` and is stopped
at exit."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import weakref

__all__ = ["free_ports", "live", "signal_group", "spawn", "terminate"]


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = map(int, f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1, chosen below the kernel's ephemeral
    range so that a client's outgoing connection can't grab one before the server binds."""
    lo, _ = _ephemeral_range()
    low, high = (10000, lo - 1) if lo > 12000 else (lo, 65535)
    rng = random.Random()
    socks, ports = [], []
    try:
        for _ in range(200 * n):
            if len(ports) == n:
                return ports
            port = rng.randint(low, high)
            if port in ports:
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(port)
        raise RuntimeError(f"could not find {n} free ports in {low}..{high}")
    finally:
        for s in socks:
            s.close()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class _Spawner(threading.Thread):
    """One thread that lives as long as the process and forks every child. PR_SET_PDEATHSIG
    fires when the *thread* that forked exits, so a child started from a short-lived thread
    (a test restarting a broker in the background) would be killed with that thread."""

    def __init__(self):
        super().__init__(name="pyprod-spawner", daemon=True)
        self.jobs = queue.Queue()
        self.start()

    def run(self):
        while True:
            fn, box, done = self.jobs.get()
            try:
                box.append(fn())
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append(e)
            done.set()

    def call(self, fn):
        box, done = [], threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


_spawner = None
_spawner_lock = threading.Lock()


# Windows: no sessions, no preexec_fn, no process groups to signal (a process group there is
# for console Ctrl events); the child is killed by its handle instead.
_POSIX = os.name == "posix"
_NEW_GROUP = (dict(start_new_session=True, preexec_fn=_die_with_parent) if _POSIX else
              dict(creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)))


def spawn(argv, *, log_path=None, env=None, cwd=None, stdin=subprocess.DEVNULL,
          stdout=None) -> subprocess.Popen:
    """Start ``argv`` in its own session (POSIX); it gets SIGKILL if this process dies (Linux).

    Output (stderr always, stdout unless ``stdout`` is given, e.g. ``subprocess.PIPE``) is
    appended to ``log_path`` (default: discarded).
    """
    global _spawner

    def start():
        with open(log_path or os.devnull, "ab") as fh:
            return subprocess.Popen(
                argv, stdin=stdin, stdout=fh if stdout is None else stdout, stderr=fh,
                env=env, cwd=cwd, **_NEW_GROUP)
    with _spawner_lock:
        if _spawner is None:
            _spawner = _Spawner()
    return _spawner.call(start)


def terminate(proc: subprocess.Popen | None, timeout: float = 15.0, *, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL if ``kill``) the process group; SIGKILL after ``timeout``."""
    if proc is None or proc.poll() is not None:
        if proc is not None:
            proc.wait()
        return
    signal_group(proc, kill=kill)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        signal_group(proc, kill=True)
        proc.wait()


def signal_group(proc: subprocess.Popen, *, kill: bool = False) -> None:
    """SIGTERM (SIGKILL if ``kill``) the process group ``spawn`` made for ``proc``; on Windows,
    which has neither, the process itself is terminated (TerminateProcess either way)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if _POSIX:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        else:
            proc.kill()


# Every running broker (LocalBroker; the repository's test harnesses too): stopped at exit.
live = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for c in list(live):
        with contextlib.suppress(Exception):
            c.stop(timeout=5)

