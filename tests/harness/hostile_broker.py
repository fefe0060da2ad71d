"""HostileBroker: a tiny Kafka broker on 127.0.0.1 that misbehaves on purpose.

It speaks ApiVersions, Metadata (itself as the only broker, leader of every partition),
InitProducerId and Produce just well enough for a producer, built with pyprod's own protocol
encoders. What it does with each request is pluggable: ``on(api_key, action, times=None)``
picks an action for the next ``times`` requests of that API (every one if None; api_key None
matches any API), ``on_accept(action)`` runs when a connection is accepted. The actions below
answer late, wrong, half, forever or never; an action is any callable ``action(ctx) -> bool``
(False closes the connection), with ``ctx`` an _Exchange.

With ``upstream="host:port"`` (a real broker) the broker forwards what it does not misbehave
on and rewrites Metadata answers through ``rewrite_metadata(response) -> response``: a proxy in
front of a real broker, or a hostile node inside a real cluster's metadata.

One thread accepts, one thread per connection serves (blocking sockets): fine for tests.
"""
import itertools
import random
import socket
import struct
import threading

from pyprod.protocol import FLEXIBLE_FROM, api_versions, header, init_producer_id, produce
from pyprod.protocol import metadata as metadata_api

__all__ = ["HostileBroker", "answer", "wrong_correlation_id", "truncate", "frame_size", "junk",
           "silence", "drip", "slow", "close", "reset", "unsolicited", "body", "answer_error",
           "random_metadata", "DEFAULT_RANGES"]

_I32 = struct.Struct(">i")
_IO_TIMEOUT = 5.0  # a blocked write to a client that stopped reading gives up after this
DEFAULT_RANGES = {api_versions.API_KEY: (0, 3), metadata_api.API_KEY: (0, 12),
                  init_producer_id.API_KEY: (0, 4), produce.API_KEY: (3, 9)}


class _Exchange:
    """One request on one connection: what an action sees and uses."""

    def __init__(self, broker, sock, request, reader, muted):
        self.broker, self.sock, self.request, self.reader = broker, sock, request, reader
        self._answer = False
        self._muted = muted

    @property
    def answer(self):
        """The normal answer frame (size prefix included), None if none is expected (or on
        accept, where there is no request)."""
        if self._answer is False and self.request is None:
            self._answer = None
        if self._answer is False:
            self._answer = self.broker.answer(self.request, self.reader)
        return self._answer

    def send(self, data):
        self.sock.sendall(data)

    def mute(self):
        """No answer to any later request on this connection either (as a stuck broker)."""
        self._muted.add(self.sock)

    def wait(self, seconds):
        """Sleep; False if the broker is stopping meanwhile."""
        return not self.broker._stopping.wait(seconds)


# -- actions ------------------------------------------------------------------------------------

def answer(ctx):
    """The normal answer."""
    if ctx.answer is not None:
        ctx.send(ctx.answer)
    return True


def wrong_correlation_id(delta=1):
    def act(ctx):
        frame = bytearray(ctx.answer or _frame(ctx.request.correlation_id, b"\x00" * 8))
        frame[4:8] = _I32.pack((ctx.request.correlation_id + delta) & 0x7FFFFFFF)
        ctx.send(frame)
        return True
    return act


def truncate(keep=0.5):
    """Send part of the answer (a fraction, or a byte count) and close."""
    def act(ctx):
        frame = ctx.answer or _frame(ctx.request.correlation_id, b"\x00" * 32)
        n = int(len(frame) * keep) if isinstance(keep, float) else keep
        ctx.send(frame[:max(1, min(n, len(frame) - 1))])
        return False
    return act


def frame_size(size, then=b"\x00" * 64):
    """A size prefix claiming ``size`` bytes (huge, negative), then ``then``; stays open."""
    def act(ctx):
        ctx.send(_I32.pack(size) + then)
        return True
    return act


def junk(seed=0, chunk=65536, limit=None, prefix=b""):
    """Stream random bytes (after ``prefix``) until the client goes, or ``limit`` bytes."""
    def act(ctx):
        rng = random.Random(seed)
        data = rng.randbytes(chunk)
        sent = 0
        ctx.send(prefix)
        while not ctx.broker._stopping.is_set() and (limit is None or sent < limit):
            ctx.send(data)
            sent += len(data)
        return False
    return act


def silence(ctx):
    """Never answer again on this connection (it stays open and keeps reading)."""
    ctx.mute()
    return True


def drip(interval_ms):
    """The answer one byte every ``interval_ms``."""
    def act(ctx):
        for i in range(len(ctx.answer or b"")):
            if not ctx.wait(interval_ms / 1000.0):
                return False
            ctx.send(ctx.answer[i:i + 1])
        return True
    return act


def slow(delay_ms):
    """The answer, after ``delay_ms``."""
    def act(ctx):
        return ctx.wait(delay_ms / 1000.0) and answer(ctx)
    return act


def close(ctx):
    """Close without answering."""
    return False


def reset(keep=0.5):
    """Send part of the answer, then reset the connection (RST, SO_LINGER 0)."""
    def act(ctx):
        frame = b""
        if ctx.request is not None:
            frame = ctx.answer or _frame(ctx.request.correlation_id, b"\x00" * 32)
        n = int(len(frame) * keep) if isinstance(keep, float) else keep
        if n:
            ctx.send(frame[:n])
        _abort(ctx.sock)
        return False
    return act


def unsolicited(count=1, before=False):
    """Besides the answer, ``count`` frames answering no request (before or after it)."""
    def act(ctx):
        extra = b"".join(_frame(0x7FFF0000 + i, b"\x00" * 16) for i in range(count))
        ctx.send((extra + (ctx.answer or b"")) if before else ((ctx.answer or b"") + extra))
        return True
    return act


def body(data):
    """Answer with the right response header and ``data`` as the body (malformed replies)."""
    def act(ctx):
        req = ctx.request
        api = _MODULES[req.api_key].API
        ctx.send(header.write_response_frame(api, req.api_version, req.correlation_id, data))
        return True
    return act


def answer_error(code):
    """Produce: every partition answers ``code``; ApiVersions: the error in a v0 body."""
    def act(ctx):
        ctx.send(ctx.broker.answer(ctx.request, ctx.reader, error_code=code))
        return True
    return act


# -- metadata -----------------------------------------------------------------------------------

BAD_HOSTS = ("unresolvable.invalid", "\u00ff\u00fe.invalid", "\u0431\u0440\u043e.invalid",
             "a" * 64 + ".invalid", "a..b", "...", "", "x" * 300, b"\xff\xfe\xc3bad-utf8")


def random_metadata(seed=0, self_weight=1):
    """A metadata provider for HostileBroker(metadata=...): random node ids, leaders, epochs,
    partition counts and indexes (negative, huge, gaps), and hosts (itself sometimes;
    unresolvable, non-ASCII, unencodable hosts, bad ports; invalid UTF-8 as bytes), different
    on every call: leaders move forever."""
    rng = random.Random(seed)

    def provide(broker, topics):
        brokers, ids = [], []
        for _ in range(rng.randint(1, 4)):
            node = rng.choice([rng.randint(0, 5), rng.randint(-3, -1), 2**31 - 1])
            if rng.random() < 0.3 * self_weight:
                host, port = "127.0.0.1", broker.port
            else:
                host = rng.choice(BAD_HOSTS)
                port = rng.choice([9, 0, 65535, 70000, -1, broker.port])
            brokers.append({"node_id": node, "host": host, "port": port, "rack": None})
            ids.append(node)
        out = []
        for name in topics:
            parts = []
            for p in range(rng.randint(1, 4)):
                leader = rng.choice(ids + [-1, 99, broker.node_id])
                index = p if rng.random() < 0.8 else rng.choice([-1, p + 7, 2**31 - 1])
                parts.append({"error_code": rng.choice([0, 0, 0, 5, 6]), "partition_index": index,
                              "leader_id": leader, "leader_epoch": rng.randint(-1, 50),
                              "replica_nodes": ids, "isr_nodes": ids[:1],
                              "offline_replicas": []})
            out.append({"error_code": 0, "name": name, "is_internal": False,
                        "partitions": parts})
        return brokers, out
    return provide


# -- the broker ---------------------------------------------------------------------------------

_MODULES = {m.API_KEY: m for m in (api_versions, metadata_api, init_producer_id, produce)}


def _frame(correlation_id, data):
    return _I32.pack(4 + len(data)) + _I32.pack(correlation_id) + bytes(data)


def _abort(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class HostileBroker:
    """See the module docstring. ``topics``: {name: partitions} known up front; other topics
    are created on first use with ``default_partitions``."""

    def __init__(self, topics=None, node_id=1, ranges=None, metadata=None, upstream=None,
                 rewrite_metadata=None, default_partitions=1):
        self.node_id = node_id
        self.topics = dict(topics or {})
        self.default_partitions = default_partitions
        self.ranges = dict(DEFAULT_RANGES if ranges is None else ranges)
        self.metadata = metadata          # provider(broker, topic names) -> (brokers, topics)
        self.upstream = upstream
        self.rewrite_metadata = rewrite_metadata
        self.requests = []                # (api_key, api_version, correlation_id) as received
        self.accepted = 0
        self.produced = 0                 # Produce requests answered normally
        self.errors = []                  # exceptions of the serving threads (harness bugs)
        self._rules = []                  # [api_key or None, action, times left or None]
        self._accept_rules = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._socks = set()
        self._threads = []
        self._offsets = itertools.count()
        self._pids = itertools.count(1000)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True,
                                          name="hostile-broker-%d" % self.port)
        self._accepter.start()

    @property
    def bootstrap_servers(self):
        return "127.0.0.1:%d" % self.port

    def on(self, api_key, action, times=None):
        """Run ``action`` for the next ``times`` requests of api_key (None: any API)."""
        with self._lock:
            self._rules.append([api_key, action, times])
        return self

    def on_accept(self, action, times=None):
        """Run ``action(ctx)`` (ctx.request is None) on accepted connections."""
        with self._lock:
            self._accept_rules.append([None, action, times])
        return self

    def requests_of(self, api_key):
        return [r for r in list(self.requests) if r[0] == api_key]

    def close(self):
        self._stopping.set()
        for how in (lambda: self._listener.shutdown(socket.SHUT_RDWR), self._listener.close):
            try:  # shutdown wakes the accept() that close() alone leaves blocked
                how()
            except OSError:
                pass
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accepter.join(10)
        for t in list(self._threads):
            t.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- serving --

    def _pick(self, rules, api_key):
        with self._lock:
            for rule in rules:
                if rule[0] in (None, api_key) and rule[2] != 0:
                    if rule[2] is not None:
                        rule[2] -= 1
                    return rule[1]
        return None

    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            t = threading.Thread(target=self._serve, args=(sock,), daemon=True,
                                 name="hostile-broker-conn-%d" % self.port)
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
            t.start()

    def _serve(self, sock):
        with self._lock:
            self._socks.add(sock)
        sock.settimeout(_IO_TIMEOUT)
        up, muted = None, set()
        try:
            action = self._pick(self._accept_rules, None)
            if action is not None and not action(_Exchange(self, sock, None, None, muted)):
                return
            sock.settimeout(None)  # reads wait for the client; close() shuts them down
            while not self._stopping.is_set():
                size = _recv_exact(sock, 4)
                if size is None:
                    return
                data = _recv_exact(sock, _I32.unpack(size)[0])
                if data is None:
                    return
                request, reader = header.read_request_header(data, FLEXIBLE_FROM)
                self.requests.append(request[:3])
                if muted:
                    continue
                sock.settimeout(_IO_TIMEOUT)
                action = self._pick(self._rules, request.api_key)
                ctx = _Exchange(self, sock, request, reader, muted)
                if action is None and self.upstream is not None:
                    up = up or socket.create_connection(_address(self.upstream), _IO_TIMEOUT)
                    action = _forward(up, size + data)
                if not (action or answer)(ctx):
                    return
                sock.settimeout(None)
        except OSError:
            pass  # the client went away
        except Exception as e:  # noqa: BLE001 - a harness bug: kept for the test to see
            self.errors.append(e)
        finally:
            with self._lock:
                self._socks.discard(sock)
            for s in (sock, up):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    # -- normal answers --

    def answer(self, request, reader, error_code=0):
        """The normal answer frame to a request (None when none is expected)."""
        key, version, cid = request.api_key, request.api_version, request.correlation_id
        module = _MODULES.get(key)
        if module is None:  # an API we do not know: a frame that decodes as nothing
            return _frame(cid, b"")
        if key == api_versions.API_KEY:
            if error_code:
                version = 0
            payload = module.API.encode_response(version, {
                "error_code": error_code, "throttle_time_ms": 0,
                "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                             for k, (lo, hi) in sorted(self.ranges.items())]})
        elif key == metadata_api.API_KEY:
            payload = self._metadata_body(version,
                                          module.API.decode_request(version, reader.fork()))
        elif key == init_producer_id.API_KEY:
            payload = module.API.encode_response(version, {
                "throttle_time_ms": 0, "error_code": error_code,
                "producer_id": next(self._pids), "producer_epoch": 0})
        else:
            req = module.API.decode_request(version, reader.fork())
            if req.acks == 0:
                return None
            payload = module.API.encode_response(version, {"throttle_time_ms": 0, "responses": [
                {"name": t.name, "partition_responses": [
                    {"index": p.index, "error_code": error_code,
                     "base_offset": -1 if error_code else next(self._offsets),
                     "log_append_time_ms": -1, "log_start_offset": 0}
                    for p in t.partition_data]} for t in req.topic_data]})
            if not error_code:
                self.produced += 1
        return header.write_response_frame(module.API, version, cid, payload)

    def _metadata_body(self, version, req):
        if req.topics is None or (version == 0 and not req.topics):  # all topics
            names = sorted(self.topics)
        else:
            names = [t.name for t in req.topics if t.name]
            for name in names:
                self.topics.setdefault(name, self.default_partitions)
        if self.metadata is not None:
            brokers, topics = self.metadata(self, names)
        else:
            brokers = [{"node_id": self.node_id, "host": "127.0.0.1", "port": self.port,
                        "rack": None}]
            topics = [{"error_code": 0, "name": n, "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": p, "leader_id": self.node_id,
                 "leader_epoch": 0, "replica_nodes": [self.node_id],
                 "isr_nodes": [self.node_id], "offline_replicas": []}
                for p in range(self.topics[n])]} for n in names]
        raw = {}  # hosts given as bytes (not UTF-8): a same-length placeholder, swapped after
        for i, b in enumerate(brokers):
            if isinstance(b["host"], bytes):
                mark = ("\x01%d\x01" % i).ljust(len(b["host"]), "\x02")
                raw[mark.encode()] = b["host"]
                b = brokers[i] = dict(b, host=mark)
        payload = metadata_api.API.encode_response(version, {
            "throttle_time_ms": 0, "brokers": brokers, "cluster_id": "hostile",
            "controller_id": self.node_id, "topics": topics})
        for mark, host in raw.items():
            payload = payload.replace(mark, host, 1)
        return payload


def _address(hostport):
    host, _, port = hostport.split(",")[0].rpartition(":")
    return host, int(port)


def _forward(up, frame):
    """An action: send the request upstream as it is and relay the answer (Metadata answers go
    through the broker's rewrite_metadata)."""
    def act(ctx):
        req = ctx.request
        up.sendall(frame)
        if req.api_key == produce.API_KEY and produce.API.decode_request(
                req.api_version, ctx.reader.fork()).acks == 0:
            return True
        size = _recv_exact(up, 4)
        data = size and _recv_exact(up, _I32.unpack(size)[0])
        if not data:
            return False
        rewrite = ctx.broker.rewrite_metadata
        if req.api_key == metadata_api.API_KEY and rewrite is not None:
            _, resp = header.decode_response(metadata_api, req.api_version, data, strict=False)
            data = header.write_response_frame(
                metadata_api.API, req.api_version, req.correlation_id,
                metadata_api.API.encode_response(req.api_version, rewrite(resp)))[4:]
        ctx.send(_I32.pack(len(data)) + data)
        return True
    return act
