"""Make this interpreter look like Windows' to our code: to the modules of pyprod, kcore and
tests/, the POSIX-only modules can't be imported and the POSIX-only names of os, signal, select,
socket and time are gone; socket.socketpair is TCP over 127.0.0.1 and selectors.DefaultSelector
is select(), as on Windows. tests/test_portable_imports.py runs the wheel's test step so (there
is no Windows runner here): ``python -c "import tests.harness.windows_like as w; w.install();
..."``.

The stdlib, pytest and the other dependencies still see everything: on Windows they take their
own branches (sys.platform stays what it is here), and only our code is under test.
"""
import sys

__all__ = ["install", "BLOCKED_MODULES"]

# Modules CPython does not build on Windows.
BLOCKED_MODULES = ("fcntl", "termios", "tty", "pty", "pwd", "grp", "resource", "syslog", "crypt",
                   "nis", "spwd", "posix", "_posixshmem", "readline", "curses", "_curses")

# Names of the POSIX build that Windows' builds lack.
_GONE = {
    "os": ("fork", "forkpty", "register_at_fork", "getuid", "geteuid", "getgid", "getegid",
           "getgroups", "setuid", "setgid", "setsid", "getsid", "setpgid", "getpgid", "getpgrp",
           "killpg", "WNOHANG", "WIFSIGNALED", "WIFEXITED", "WEXITSTATUS", "WTERMSIG",
           "WIFSTOPPED", "wait", "wait3", "wait4", "waitid", "sched_getaffinity",
           "sched_setaffinity", "sched_yield", "pipe2", "mkfifo", "mknod", "nice", "getloadavg",
           "sysconf", "sysconf_names", "confstr", "pathconf", "fpathconf", "uname", "chown",
           "lchown", "fchown", "chroot", "statvfs", "fstatvfs", "sync", "fdatasync", "pread",
           "pwrite", "preadv", "pwritev", "readv", "writev", "sendfile", "posix_fadvise",
           "posix_fallocate", "posix_spawn", "posix_spawnp", "memfd_create", "eventfd",
           "splice", "copy_file_range", "lockf", "O_NONBLOCK", "O_CLOEXEC", "O_SYNC", "O_DSYNC",
           "getpriority", "setpriority", "openpty", "ttyname", "ctermid", "pidfd_open",
           "get_blocking", "set_blocking", "getxattr", "setxattr", "listxattr", "removexattr"),
    "signal": ("SIGHUP", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE",
               "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGWINCH",
               "SIGXCPU", "SIGPROF", "SIGVTALRM", "SIGIO", "SIGURG", "SIGSYS", "SIGTRAP",
               "SIGBUS", "alarm", "pause", "setitimer", "getitimer", "ITIMER_REAL",
               "ITIMER_VIRTUAL", "ITIMER_PROF", "siginterrupt", "pthread_kill",
               "pthread_sigmask", "sigpending", "sigwait", "sigwaitinfo", "sigtimedwait",
               "SIG_BLOCK", "SIG_UNBLOCK", "SIG_SETMASK", "pidfd_send_signal"),
    "select": ("poll", "epoll", "devpoll", "kqueue", "kevent", "PIPE_BUF"),
    "socket": ("AF_UNIX", "MSG_DONTWAIT", "MSG_NOSIGNAL", "MSG_MORE", "MSG_EOR", "MSG_CMSG_CLOEXEC",
               "MSG_CONFIRM", "MSG_ERRQUEUE", "MSG_FASTOPEN",
               "SOCK_NONBLOCK", "SOCK_CLOEXEC", "SO_REUSEPORT", "TCP_CORK", "TCP_QUICKACK",
               "TCP_USER_TIMEOUT", "TCP_INFO", "TCP_NOTSENT_LOWAT", "TCP_DEFER_ACCEPT",
               "CMSG_LEN", "CMSG_SPACE", "SCM_RIGHTS", "sethostname"),
    "time": ("clock_gettime", "clock_gettime_ns", "clock_settime", "clock_settime_ns",
             "clock_getres", "CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_REALTIME",
             "CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID", "CLOCK_BOOTTIME",
             "CLOCK_TAI", "pthread_getcpuclockid", "tzset"),
}


def install(missing=()):
    """Guard the imports and the modules' names (once). ``missing``: more top-level packages
    our code must not find (installed here, absent where the check stands for)."""
    import builtins
    import selectors
    import socket
    import types

    roots = _project_roots()
    real_import = builtins.__import__

    blocked = frozenset(BLOCKED_MODULES + tuple(missing))

    def ours(globals_):
        """Code of pyprod, kcore, tests/, or the ``python -c`` code that installed this."""
        globals_ = globals_ or {}
        if "__file__" not in globals_:
            return globals_.get("__name__") == "__main__"
        return (globals_["__file__"] or "").startswith(roots)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name.partition(".")[0] in blocked and ours(globals):
            raise ModuleNotFoundError(f"No module named {name!r} (windows_like)", name=name)
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import
    for module, names in _GONE.items():
        gone = frozenset(names)

        class Guarded(types.ModuleType):
            def __getattribute__(self, attr, _gone=gone):
                if attr in _gone and ours(sys._getframe(1).f_globals):
                    raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}"
                                         " (windows_like)")
                return super().__getattribute__(attr)

        __import__(module).__class__ = Guarded
    selectors.DefaultSelector = selectors.SelectSelector  # Windows has select() alone
    socket.socketpair = _tcp_socketpair


def _project_roots() -> tuple:
    """The folders of pyprod, kcore (found, not imported) and tests/."""
    from importlib.util import find_spec
    import os
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # tests/
    for pkg in ("pyprod", "kcore"):
        roots += find_spec(pkg).submodule_search_locations
    return tuple(os.path.join(r, "") for r in roots)


def _tcp_socketpair(family=None, type=None, proto=0):
    """socket.socketpair as Windows' CPython makes it: two TCP sockets over 127.0.0.1."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        a = socket.create_connection(lsock.getsockname())
        b, _ = lsock.accept()
    return a, b
