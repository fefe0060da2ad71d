"""Socket readiness and non-blocking socket I/O for the NetworkClient (Java's Selector role).

Selector has the register / unregister / modify / select / close subset of
selectors.DefaultSelector that the NetworkClient uses. send_buffers writes a list of bytes-like
objects (at most MAX_IOV) with one call and returns the count written; recv_into reads what is
available. Both raise BlockingIOError when the socket is not ready, as socket methods do.
select_io is select() that also does the I/O of the ready sockets whose kcore Channel is
attached (set_channel): their queued writes and their reads, collected later by the connection.

The compiled twin does the same with poll(2) / writev(2) / recv(2), holding the GIL for the calls
that do not wait (see kcore/selector.pyx for why); this twin uses the stdlib, which always
releases it.
"""
import ctypes
import selectors
import socket
import sys

__all__ = ["Selector", "Waker", "send_buffers", "recv_into", "MAX_IOV"]

MAX_IOV = 64
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")
_PR_SET_TIMERSLACK = 29  # Linux's prctl option


class Selector:
    """register / unregister / modify / select / close, as selectors.DefaultSelector."""

    def __init__(self):
        self._sel = selectors.DefaultSelector()
        self._channels = {}  # fd -> Channel whose I/O select_io does

    def register(self, fileobj, events, data=None):
        return self._sel.register(fileobj, events, data)

    def unregister(self, fileobj):
        key = self._sel.unregister(fileobj)
        self._channels.pop(key.fd, None)
        return key

    def set_channel(self, fileobj, channel):
        """select_io does the I/O of this registered socket's channel while it is attached
        (None: no longer); unregister() forgets it."""
        fd = self._sel.get_key(fileobj).fd
        if channel is None:
            self._channels.pop(fd, None)
        else:
            self._channels[fd] = channel

    def modify(self, fileobj, events, data=None):
        return self._sel.modify(fileobj, events, data)

    def precise_timers(self):
        """The calling thread's timed waits (on this Selector too) end on time: Linux's timer
        slack, 50 us added to each by default, set to 1 us (the Sender's linger). True if set
        (Linux)."""
        if not sys.platform.startswith("linux"):
            return False
        try:
            one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
            return ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, one, zero, zero, zero) == 0
        except (OSError, AttributeError):
            return False

    def close(self):
        self._channels.clear()
        self._sel.close()

    def select(self, timeout=None):
        """[(key, events)] ready now, waiting up to timeout seconds (None: forever)."""
        return self._sel.select(timeout)

    def select_io(self, timeout=None):
        """select(), and the I/O of every ready socket with an attached channel (set_channel)
        (the compiled twin does that I/O in the poll's section without the GIL)."""
        events = self._sel.select(timeout)
        for key, mask in events:
            channel = self._channels.get(key.fd)
            if channel is not None and channel.direct:
                channel.io(mask & selectors.EVENT_READ, mask & selectors.EVENT_WRITE)
        return events


class Waker:
    """Interrupts a Selector's wait from any thread (Java's Selector.wakeup): a socket pair
    whose reader the Selector watches, and one byte written while a wake-up is pending."""

    def __init__(self):
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)
        self._buf = bytearray(1024)
        self.pending = False

    def wakeup(self):
        """Interrupt the Selector's wait (thread-safe); nearly free while one is pending."""
        if self.pending:
            return
        self.pending = True
        try:
            send_buffers(self.writer, (b"x",))
        except OSError:  # BlockingIOError: a byte is there already; or closed
            pass

    wake = wakeup

    def drain(self):
        """Read the pending bytes (the Selector's thread, once its wait returned)."""
        try:
            while recv_into(self.reader, self._buf):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        # After draining: a wakeup() between the two leaves a byte, so the next wait returns.
        self.pending = False

    def close(self):
        self.reader.close()
        self.writer.close()


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
