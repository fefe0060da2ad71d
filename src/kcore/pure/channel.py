"""Channel: a broker connection's framing buffer, its two byte streams (Java's NetworkSend queue
and NetworkReceive): requests waiting to be written, whole frames in order, each handed over as a
list of bytes-like objects that are written uncopied; and the size-prefixed frames being read.
A concept of its own, not another name for the connection: the connection (kcore's
BrokerConnection: state, socket, in-flight FIFO, attempts) owns one, and Selector.select_io
drives it alone, without the GIL and without the connection.

write() writes plaintext with writev; for TLS the connection writes pending() through its ssl
object and reports the count with advance(). Both return the tags of the frames whose last byte
went out. read() reads plaintext; for TLS the connection reads and hands the bytes to feed().
A frame size outside 4..max_frame is an InvalidReceiveError; a frame grows as its bytes arrive
(a hostile size never allocates up front).

The compiled twin keeps both streams in C (kcore/channel.pyx), so the Sender's loop can drive
them without the GIL.
"""
from kcore.pure.selector import MAX_IOV, recv_into, send_buffers
from kcore.errors import InvalidReceiveError

__all__ = ["Channel", "RECV_CHUNK", "INBOX"]

RECV_CHUNK = 65536
INBOX = 262144   # bytes select_io reads per socket and poll, at most


class Channel:
    def __init__(self, max_frame, peer):
        self.max_frame = int(max_frame)
        self.peer = peer           # "node 1 (host:port)", for errors
        self._out = []             # [tag, [memoryview, ...]] not fully written, oldest first
        self._rbuf = None
        self._size_buf = bytearray(4)
        self._size_got = 0
        self._frame = None         # bytearray of the frame being read, or None
        self._frame_size = 0
        self._sock = None          # attached: Selector.select_io does its I/O
        self._written = []         # what select_io did, until take_*()
        self._inbox = bytearray()
        self._eof = False
        self._write_errno = self._read_errno = 0

    # -- sending --
    def enqueue(self, tag, buffers):
        """Queue a whole frame; tag comes back from write()/advance() once it is written."""
        views = []
        for b in buffers:
            mv = b if isinstance(b, memoryview) else memoryview(b)
            if mv.ndim != 1 or mv.itemsize != 1:
                mv = mv.cast("B")
            if len(mv):
                views.append(mv)
        self._out.append([tag, views])

    @property
    def wants_write(self):
        return bool(self._out)

    def pending(self, max_iov=MAX_IOV):
        """The unwritten buffers, oldest first (at most max_iov)."""
        iov = []
        for _, views in self._out:
            iov.extend(views[:max_iov - len(iov)])
            if len(iov) >= max_iov:
                break
        return iov

    def advance(self, written):
        """written bytes of pending() went out: the tags of the frames now fully written."""
        done, out = [], self._out
        while out:
            tag, views = out[0]
            while views and written:
                head = views[0]
                if written >= len(head):
                    written -= len(head)
                    views.pop(0)
                else:
                    views[0] = head[written:]
                    written = 0
            if views:
                break
            out.pop(0)
            done.append(tag)
        return done

    def write(self, sock):
        """Write what a plaintext socket takes; the tags of the frames now fully written.
        OSError other than would-block is raised."""
        done, self._written = self._written, []  # select_io's first, in order
        while self._out:
            try:
                n = send_buffers(sock, self.pending())
            except (BlockingIOError, InterruptedError):
                break
            done += self.advance(n)
            if not n:
                break
        return done

    # -- receiving --
    def read(self, sock, frames, max_reads=32):
        """Read a plaintext socket until it would block (at most max_reads reads), adding the
        complete frames (without size prefix) to frames. Returns (bytes read, eof)."""
        if self._rbuf is None:
            self._rbuf = bytearray(RECV_CHUNK)
            self._rview = memoryview(self._rbuf)
        total = 0
        for _ in range(max_reads):
            try:
                n = recv_into(sock, self._rbuf)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:
                return total, True
            total += n
            self.feed(self._rview, n, frames)
            if n < RECV_CHUNK:
                break
        return total, False

    def feed(self, view, n, frames):
        """The first n bytes of view arrived: add the frames they complete to frames."""
        if not 0 <= n <= len(view):
            raise ValueError("n out of range: %d of %d bytes" % (n, len(view)))
        pos = 0
        while pos < n:
            if self._frame is None:
                take = min(4 - self._size_got, n - pos)
                self._size_buf[self._size_got:self._size_got + take] = view[pos:pos + take]
                self._size_got += take
                pos += take
                if self._size_got < 4:
                    return
                self._size_got = 0
                size = int.from_bytes(self._size_buf, "big", signed=True)
                if size < 4 or size > self.max_frame:
                    raise InvalidReceiveError(
                        "%s sent a frame of %d bytes (valid: 4..%d, receive_message_max_bytes); "
                        "closing the connection" % (self.peer, size, self.max_frame))
                if n - pos >= size:  # whole frame in this chunk: one copy
                    frames.append(bytes(view[pos:pos + size]))
                    pos += size
                    continue
                self._frame = bytearray()
                self._frame_size = size
            take = min(self._frame_size - len(self._frame), n - pos)
            self._frame += view[pos:pos + take]
            pos += take
            if len(self._frame) == self._frame_size:
                frames.append(self._frame)
                self._frame = None

    def clear(self):
        """Drop what is unwritten and the frame being read (the connection closed)."""
        self._out.clear()
        self._frame = None
        self._size_got = 0
        self.detach()

    # -- direct I/O (Selector.select_io) --
    def attach(self, sock):
        """From now on Selector.select_io writes and reads this plaintext socket itself."""
        if sock.fileno() < 0:
            raise OSError(9, "Bad file descriptor")
        self._sock = sock

    def detach(self):
        self._sock = None
        self._written, self._inbox, self._eof = [], bytearray(), False
        self._write_errno = self._read_errno = 0

    @property
    def direct(self):
        return self._sock is not None

    def io(self, readable, writable):
        """The I/O select_io does for a ready socket (the compiled twin without the GIL)."""
        if self._sock is None or self._write_errno or self._read_errno or self._eof:
            return
        if writable:
            try:
                self._written = self.write(self._sock)  # (the earlier ones first)
            except OSError as e:
                self._write_errno = e.errno or 5
        while readable and len(self._inbox) < INBOX:
            try:
                data = self._sock.recv(INBOX - len(self._inbox))
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self._read_errno = e.errno or 5
                break
            if not data:
                self._eof = True
                break
            self._inbox += data

    def take_written(self):
        """(tags of the frames select_io finished writing, errno of a failed write or 0)."""
        done, self._written = self._written, []
        err, self._write_errno = self._write_errno, 0
        return done, err

    def take_received(self, frames):
        """What select_io read: its complete frames added to frames; (bytes, eof, errno of a
        failed read or 0). A bad frame size raises InvalidReceiveError."""
        inbox, self._inbox = self._inbox, bytearray()
        eof, err = self._eof, self._read_errno
        self._eof, self._read_errno = False, 0
        if inbox:
            self.feed(memoryview(inbox), len(inbox), frames)
        return len(inbox), eof, err
