"""The refresh thread of credential holders (the OIDC token provider, AWS_MSK_IAM credentials):
the network I/O of a refresh happens there, never on the Sender thread."""
import threading
import weakref


def _loop(ref, stop, wait):
    """Holds the owner only weakly, so an owner nobody holds any more (its producer gone) stops
    its thread at the next wake-up even without close()."""
    while not stop.wait(max(wait, 0.0)):
        owner = ref()
        if owner is None:
            return
        wait = owner._refresh_once()
        del owner


def start_thread(owner, stop, first_wait, name):
    """Start and return a daemon thread that calls ``owner._refresh_once()`` (which returns the
    seconds until the next call) first after ``first_wait`` seconds, until ``stop`` is set."""
    thread = threading.Thread(target=_loop, args=(weakref.ref(owner), stop, first_wait),
                              name=name, daemon=True)
    thread.start()
    return thread
