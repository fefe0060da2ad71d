"""Fork safety for the pure twins' locks, as fork_impl.h does for the compiled kernels: before a
fork every registered lock is taken (no state is copied halfway through an update), after it the
parent lets them go and the child gets new ones (the threads holding them do not exist there).

os.register_at_fork runs ``before`` hooks in reverse order of registration, so a module imported
first (a dependency) locks last: the accumulator's lock is taken before its pool's, kcore's lock
order."""
import os

__all__ = ["guard_locks"]


def guard_locks(locks, renew):
    """``locks()``: the locks to take before a fork, in lock order; ``renew()``: in the child,
    make new ones (and reset what the parent's threads left)."""
    if not hasattr(os, "register_at_fork"):
        return
    taken = []

    def before():
        for lock in locks():
            lock.acquire()
            taken.append(lock)

    def after_in_parent():
        while taken:
            taken.pop().release()

    def after_in_child():
        taken.clear()
        renew()

    os.register_at_fork(before=before, after_in_parent=after_in_parent,
                        after_in_child=after_in_child)
