"""Socks5Server: a tiny SOCKS5 proxy on 127.0.0.1 (RFC 1928 CONNECT, with no authentication or
RFC 1929 username/password), for the proxy_url tests.

``Socks5Server(username=None, password=None)``: with a username, every client must log in with
it. Each client is served by its own thread (blocking sockets): greeting, authentication,
CONNECT to an IPv4/IPv6 address or a name (resolved here), then bytes relayed both ways until a
side closes. What it saw is kept: ``targets`` [(address type, host, port)], ``logins``
[(username, accepted)], ``clients`` (accepted connections). To test failures: ``reply`` (answer
every CONNECT with this error code), ``hang`` (accept and never answer), ``drip`` (send the
handshake replies one byte at a time).

The password is a secret here too: no repr, log or record shows it.
"""
import ipaddress
import selectors
import socket
import struct
import threading
import urllib.parse

_HANDSHAKE_TIMEOUT_S = 10


class Socks5Server:
    def __init__(self, username=None, password=None, *, reply=0, hang=False, drip=False):
        self.username, self._password = username, password
        self.reply, self.hang, self.drip = reply, hang, drip
        self.targets, self.logins, self.clients = [], [], 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._open = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="socks5-accept").start()

    def url(self, scheme="socks5h", username=None, password=None):
        """A proxy URL for this server (user and password percent-encoded)."""
        auth = ""
        if username is not None:
            auth = "%s:%s@" % (urllib.parse.quote(username, safe=""),
                               urllib.parse.quote(password, safe=""))
        return "%s://%s127.0.0.1:%d" % (scheme, auth, self.port)

    def __repr__(self):
        return "<Socks5Server 127.0.0.1:%d user=%s>" % (self.port, self.username)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._closed = True
        self._sock.close()
        with self._lock:
            socks, self._open = list(self._open), set()
        for s in socks:
            s.close()

    # -- serving ------------------------------------------------------------------------------
    def _accept(self):
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.clients += 1
                self._open.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True,
                             name="socks5-client").start()

    def _serve(self, client):
        upstream = None
        try:
            client.settimeout(_HANDSHAKE_TIMEOUT_S)
            if self.hang:
                client.recv(1 << 16)  # and then nothing, until the client gives up
                client.recv(1 << 16)
                return
            upstream = self._handshake(client)
            if upstream is not None:
                client.settimeout(None)
                _relay(client, upstream)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    s.close()
                    with self._lock:
                        self._open.discard(s)

    def _send(self, client, data):
        if not self.drip:
            client.sendall(data)
            return
        for i in range(len(data)):
            client.sendall(data[i:i + 1])

    def _handshake(self, client):
        version, n = _exact(client, 2)
        methods = _exact(client, n)
        if version != 5:
            return None
        wanted = 2 if self.username is not None else 0
        if wanted not in methods:
            self._send(client, b"\x05\xff")
            return None
        self._send(client, bytes((5, wanted)))
        if wanted == 2:
            _, ulen = _exact(client, 2)
            user = _exact(client, ulen).decode()
            password = _exact(client, _exact(client, 1)[0]).decode()
            ok = (user, password) == (self.username, self._password)
            self.logins.append((user, ok))
            self._send(client, b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                return None
        _, cmd, _, atyp = _exact(client, 4)
        if atyp == 1:
            host = str(ipaddress.IPv4Address(_exact(client, 4)))
        elif atyp == 4:
            host = str(ipaddress.IPv6Address(_exact(client, 16)))
        else:
            host = _exact(client, _exact(client, 1)[0]).decode("idna")
        port = struct.unpack(">H", _exact(client, 2))[0]
        self.targets.append((atyp, host, port))
        upstream, code = None, self.reply
        if not code:
            try:
                upstream = socket.create_connection((host, port), timeout=_HANDSHAKE_TIMEOUT_S)
                with self._lock:
                    self._open.add(upstream)
            except OSError:
                code = 5  # connection refused
        bound = upstream.getsockname() if upstream is not None else ("0.0.0.0", 0)
        addr = ipaddress.ip_address(bound[0])
        self._send(client, bytes((5, code, 0, 1 if addr.version == 4 else 4)) + addr.packed +
                   struct.pack(">H", bound[1]))
        return upstream


def _exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return bytes(buf)


def _relay(a, b):
    """Copy bytes both ways until either side closes."""
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, b)
    sel.register(b, selectors.EVENT_READ, a)
    try:
        while True:
            for key, _ in sel.select():
                data = key.fileobj.recv(1 << 16)
                if not data:
                    return
                key.data.sendall(data)
    finally:
        sel.close()
