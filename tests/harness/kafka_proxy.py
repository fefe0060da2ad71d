"""KafkaProxy: TCP proxies on 127.0.0.1 in front of a real cluster's brokers, for faults a broker
cannot be asked for, such as an answer lost after the broker acted on the request.

Metadata answers are rewritten so that clients reach every broker through its own proxy. A rule
set with ``lose_responses(api_key, count)`` swallows the next answers to that API and closes the
client's connection, as a network failure between the broker's write and the client would.
"""
import socket
import struct
import threading

from pyprod.protocol import metadata

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id of a request


def _read_frame(sock):
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, _SIZE.unpack(head)[0])
    return None if body is None else head + body


def _read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class _Listener:
    """One proxy port, forwarding to one broker address."""

    def __init__(self, proxy, upstream):
        self.proxy, self.upstream = proxy, upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="kafka-proxy-accept").start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            _Connection(self.proxy, client, server)


class _Connection:
    def __init__(self, proxy, client, server):
        self.proxy, self.client, self.server = proxy, client, server
        self.requests = {}  # correlation id -> (api_key, api_version)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        proxy._track(self)
        threading.Thread(target=self._upstream, daemon=True, name="kafka-proxy-up").start()
        threading.Thread(target=self._downstream, daemon=True, name="kafka-proxy-down").start()

    def close(self):
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _upstream(self):
        while (frame := _read_frame(self.client)) is not None:
            api_key, api_version, cid = _HEAD.unpack_from(frame, 4)
            self.requests[cid] = (api_key, api_version)
            try:
                self.server.sendall(frame)
            except OSError:
                break
        self.close()

    def _downstream(self):
        while (frame := _read_frame(self.server)) is not None:
            cid = _SIZE.unpack_from(frame, 4)[0]
            api_key, api_version = self.requests.pop(cid, (None, None))
            if self.proxy._lose(api_key):
                break
            if api_key == metadata.API_KEY:
                frame = self.proxy._rewrite_metadata(frame, api_version)
            try:
                self.client.sendall(frame)
            except OSError:
                break
        self.close()


class KafkaProxy:
    """Proxies for ``bootstrap`` ("host:port") and, as Metadata names them, every broker."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self._lock = threading.Lock()
        self._listeners = {}  # (host, port) upstream -> _Listener
        self._connections = []
        self._rules = {}  # api_key -> responses still to lose
        self.lost = threading.Event()  # set when a rule swallowed an answer
        self.bootstrap_servers = "127.0.0.1:%d" % self._listener((host, int(port))).port

    def _listener(self, upstream):
        with self._lock:
            listener = self._listeners.get(upstream)
            if listener is None:
                listener = self._listeners[upstream] = _Listener(self, upstream)
            return listener

    def _track(self, conn):
        with self._lock:
            self._connections.append(conn)

    def lose_responses(self, api_key, count=1):
        """Swallow the next ``count`` answers to ``api_key``, closing each one's connection."""
        with self._lock:
            self.lost.clear()
            self._rules[api_key] = count

    def _lose(self, api_key):
        with self._lock:
            left = self._rules.get(api_key, 0)
            if left <= 0:
                return False
            self._rules[api_key] = left - 1
        self.lost.set()
        return True

    def _rewrite_metadata(self, frame, version):
        flexible = version >= metadata.API.flexible_from
        start = 8 + (1 if flexible else 0)  # size, correlation id, empty tagged fields
        resp = metadata.API.decode_response(version, frame[start:], strict=False)
        brokers = [b._replace(host="127.0.0.1", port=self._listener((b.host, b.port)).port)
                   for b in resp.brokers]
        body = frame[8:start] + metadata.API.encode_response(version,
                                                             resp._replace(brokers=brokers))
        return _SIZE.pack(4 + len(body)) + frame[4:8] + body

    def close(self):
        with self._lock:
            listeners, conns = list(self._listeners.values()), list(self._connections)
        for listener in listeners:
            listener.sock.close()
        for conn in conns:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
