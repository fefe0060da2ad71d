"""Socket readiness and non-blocking socket I/O for the NetworkClient (Java's Selector role).

Selector has the register / unregister / modify / select / close subset of
selectors.DefaultSelector that the NetworkClient uses. send_buffers writes a list of bytes-like
objects (at most MAX_IOV) with one call and returns the count written; recv_into reads what is
available. Both raise BlockingIOError when the socket is not ready, as socket methods do.

The compiled twin does the same with poll(2) / writev(2) / recv(2), holding the GIL for the calls
that do not wait (see kcore/selector.pyx for why); this twin uses the stdlib, which always
releases it.
"""
import selectors
import socket

__all__ = ["Selector", "send_buffers", "recv_into", "MAX_IOV"]

MAX_IOV = 64
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")


class Selector:
    """register / unregister / modify / select / close, as selectors.DefaultSelector."""

    def __init__(self):
        self._sel = selectors.DefaultSelector()

    def register(self, fileobj, events, data=None):
        return self._sel.register(fileobj, events, data)

    def unregister(self, fileobj):
        return self._sel.unregister(fileobj)

    def modify(self, fileobj, events, data=None):
        return self._sel.modify(fileobj, events, data)

    def close(self):
        self._sel.close()

    def select(self, timeout=None):
        """[(key, events)] ready now, waiting up to timeout seconds (None: forever)."""
        return self._sel.select(timeout)


def send_buffers(sock, buffers):
    """Write the bytes-like objects in order (at most MAX_IOV of them) on a non-blocking
    socket; returns the number of bytes written. BlockingIOError if none could be."""
    buffers = list(buffers)[:MAX_IOV]
    if not buffers:
        return 0
    if _HAS_SENDMSG:
        return sock.sendmsg(buffers)
    return sock.send(buffers[0])  # e.g. Windows: one buffer per call


def recv_into(sock, buffer):
    """Read what is available into a writable buffer; returns the count (0 = EOF)."""
    return sock.recv_into(buffer)
