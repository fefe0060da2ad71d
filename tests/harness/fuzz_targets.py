"""The fuzz targets: every decoder pyprod runs on bytes from the network (see testing/fuzz.py).

- frame_size, response (header + body of every API and version), one target per message
  module (ApiVersions, Metadata, Produce, InitProducerId, FindCoordinator, SaslHandshake,
  SaslAuthenticate), produce_codec (kcore, compiled against its pure twin when built);
- connection: BrokerConnection's frame reassembly over a byte stream cut into chunks, then the
  header and body of each frame; network_client: NetworkClient._handle_frame for ApiVersions,
  Metadata (up to the Cluster built from it) and Produce (up to the Sender's decode);
- scram (server-first, server-final), oauthbearer (the error challenge) and sasl (the whole
  SaslClientAuthenticator exchange for PLAIN, SCRAM and OAUTHBEARER).

``targets(pure=None)`` builds them (kcore's compiled produce codec unless ``pure``).
"""
import base64
import contextlib
import copy
import hashlib
import hmac
import json

from pyprod import errors
from pyprod.protocol import (add_offsets_to_txn, add_partitions_to_txn, api_versions,
                             describe_transactions, end_txn, find_coordinator, header,
                             init_producer_id, metadata, produce, sasl_authenticate,
                             sasl_handshake, txn_offset_commit)
from pyprod.protocol.wire import Writer

from .fuzz import Target, generate, tagged_section

__all__ = ["targets", "MESSAGE_MODULES"]

MESSAGE_MODULES = (api_versions, metadata, produce, init_producer_id, find_coordinator,
                   sasl_handshake, sasl_authenticate, add_partitions_to_txn, add_offsets_to_txn,
                   end_txn, txn_offset_commit, describe_transactions)
CORRELATION_ID = 7
_STRICT = (True, False)


def _versions(module):
    return range(module.MIN_VERSION, module.MAX_VERSION + 1)


def _body(module, version, rng, lie):
    flexible = version >= module.FLEXIBLE_FROM
    if module is api_versions and version and rng.random() < 0.05:
        body = generate(module.RESPONSE, 0, False, rng, lie)  # UNSUPPORTED_VERSION in a v0 body
        return body if lie else b"\x00\x23" + body[2:]
    return generate(module.RESPONSE, version, flexible, rng, lie)


def _response_frame(module, version, rng, lie):
    """Response header (v0 or v1) + body, without the size prefix."""
    w = Writer()
    w.write_int32(CORRELATION_ID)
    if header.response_header_version(module.API, version) >= 1:
        w.write_raw(tagged_section(rng, lie))
    w.write_raw(_body(module, version, rng, lie))
    return w.getvalue()


# ---- the message decoders ---------------------------------------------------------------------


def _message_target(module):
    def seed(case, rng, lie):
        return _body(module, case[0], rng, lie)

    def run(case, data):
        version, strict = case
        resp = module.decode_response(version, data, strict)
        if module is api_versions:  # what NetworkClient and the authenticator do next
            ranges = api_versions.version_ranges(resp)
            for m in MESSAGE_MODULES:
                with contextlib.suppress(errors.IncompatibleBrokerVersion):
                    api_versions.pick_version(m, ranges)
        elif module is find_coordinator:
            find_coordinator.coordinator(resp)
        return resp

    name = module.__name__.rsplit(".", 1)[-1]
    return Target(name, [(v, s) for v in _versions(module) for s in _STRICT], seed, run,
                  doc="%s.decode_response" % name)


def _frame_size_target():
    def seed(case, rng, lie):
        return rng.choice((0, 4, 5, 1 << 20, 100_000_000, 0x7FFFFFFF)).to_bytes(4, "big")

    def run(case, data):
        return header.frame_size(data, case)

    return Target("frame_size", [header.MAX_FRAME_SIZE, 100_000_000], seed, run,
                  doc="header.frame_size")


def _response_target():
    cases = [(m, v, s) for m in MESSAGE_MODULES for v in _versions(m) for s in _STRICT]

    def seed(case, rng, lie):
        return _response_frame(case[0], case[1], rng, lie)

    def run(case, data):
        module, version, strict = case
        return header.decode_response(module, version, data, CORRELATION_ID, strict)

    return Target("response", cases, seed, run, doc="header.decode_response (header + body)")


def _produce_codec_target(pure):
    import kcore
    impl = kcore.kernels(pure=pure)
    twin = None if pure or not kcore.EXTENSIONS else kcore.kernels(pure=True)

    def seed(case, rng, lie):
        return _body(produce, case, rng, lie)

    def run_with(k):
        return lambda case, data: k.decode_produce_response(case, data)

    return Target("produce_codec", _versions(produce), seed, run_with(impl),
                  run_with(twin) if twin is not None else None,
                  doc="kcore.decode_produce_response (%s%s)" % (
                      "pure" if impl.pure else "compiled", ", pure twin" if twin else ""))


# ---- the connection and the network client ------------------------------------------------

_FRAME_CASES = [(m, v) for m in (api_versions, metadata, produce, init_producer_id,
                                 sasl_authenticate) for v in (m.MIN_VERSION, m.MAX_VERSION)]
_CHUNKS = (1, 3, 4, 7, 64, 1 << 16)


def _connection_target():
    from kcore import Channel
    max_frame = 1 << 20

    def seed(case, rng, lie):
        module, version = case
        out = bytearray()
        for _ in range(rng.choice((1, 1, 2, 3))):
            frame = _response_frame(module, version, rng, lie)
            out += len(frame).to_bytes(4, "big") + frame
        return bytes(out)

    def run(case, data):
        module, version = case
        channel = Channel(max_frame, "node 1 (127.0.0.1:9092)")
        frames, view, pos = [], memoryview(data), 0
        chunk = _CHUNKS[len(data) % len(_CHUNKS)]
        while pos < len(data):  # what a connection's read does with each recv
            n = min(chunk, len(data) - pos)
            channel.feed(view[pos:pos + n], n, frames)
            pos += n
        return [header.decode_response(module, version, f, CORRELATION_ID, False)
                for f in frames]

    return Target("connection", _FRAME_CASES, seed, run,
                  doc="kcore Channel.feed + header.decode_response")


class _Harness:
    """A NetworkClient with its closing stubbed out, for NetworkPoll.handle_frame (its
    connection has no socket, so nothing is written)."""

    def __init__(self):
        from pyprod import config
        from pyprod.producer import metadata_for, network_client_for
        settings = config.build(bootstrap_servers="127.0.0.1:9092")
        self.client = network_client_for(settings, metadata_for(settings))
        self.client.network_poll.close = self._close  # record instead of closing a socket
        self.closed = []
        self.responses = []

    def _close(self, conn, error, now, request_update=True):
        self.closed.append(error)

    def frame(self, case, data):
        from kcore import InFlightRequest
        from pyprod.connection import READY, BrokerConnection
        from pyprod.connection_lifecycle import INTERNAL_API_VERSIONS, INTERNAL_METADATA
        from pyprod.network_client import CHECKING_API_VERSIONS
        module, version = case
        client = self.client
        conn = BrokerConnection(1, "127.0.0.1", 9092)
        internal = {api_versions: INTERNAL_API_VERSIONS, metadata: INTERNAL_METADATA}.get(module)
        conn.state = CHECKING_API_VERSIONS if module is api_versions else READY
        if module is metadata:  # a metadata request in flight
            client.network_poll.updater.fetch = (1, 0)
        del self.closed[:], self.responses[:], client.network_poll.completed[:]
        conn.in_flight.append(InFlightRequest(
            CORRELATION_ID, module.API_KEY, version,
            header.response_header_version(module.API, version), True,
            self.responses.append, 0, 30000, internal))
        client.network_poll.handle_frame(conn, data, 0)
        for error in self.closed:
            if error is None:
                continue
            cause = error.__cause__  # the network layer wraps what a decoder let escape:
            if cause is not None and not isinstance(cause, errors.KafkaError):
                raise cause          # the decoder's own exception is the finding
            raise error  # a typed error passes; anything else is a finding
        for _, response in client.network_poll.completed:
            if module is produce:  # what the Sender does with it
                import kcore
                return kcore.decode_produce_response(version, response.body)
        return conn.state, client.metadata.cluster


def _network_client_target():
    harness = []

    def seed(case, rng, lie):
        return _response_frame(case[0], case[1], rng, lie)

    def run(case, data):
        if not harness:
            harness.append(_Harness())
        return harness[0].frame(case, data)

    cases = [(m, v) for m in (api_versions, metadata, produce) for v in _versions(m)]
    return Target("network_client", cases, seed, run, doc="NetworkPoll.handle_frame")


# ---- SASL ---------------------------------------------------------------------------------------

_NONCE = "fyko+d2lbbFgONRv9qkxdawL"
_SERVER_NONCE = _NONCE + "3rfcNHYJY1ZVvWVs7j"


def _fake_pbkdf2(name, password, salt, iterations):
    """PBKDF2's result shape at a fraction of its cost (the fuzzer is after the parsing)."""
    if not isinstance(salt, bytes) or not isinstance(iterations, int):
        raise TypeError("pbkdf2 got %r, %r" % (type(salt), type(iterations)))
    return hmac.new(password, salt + iterations.to_bytes(8, "big", signed=True), name).digest()


class _CheapHashlib:
    sha256 = staticmethod(hashlib.sha256)
    sha512 = staticmethod(hashlib.sha512)
    pbkdf2_hmac = staticmethod(_fake_pbkdf2)


@contextlib.contextmanager
def cheap_pbkdf2():
    """SCRAM's key derivation made cheap while fuzzing (a mutated iteration count can ask for
    millions of rounds, which the client allows up to 2**24)."""
    from pyprod.sasl import scram
    saved, scram.hashlib = scram.hashlib, _CheapHashlib
    try:
        yield
    finally:
        scram.hashlib = saved


def _server_first(rng):
    salt = base64.b64encode(rng.randbytes(rng.choice((0, 8, 16)))).decode()
    parts = ["r=" + _SERVER_NONCE, "s=" + salt, "i=" + str(rng.choice((4096, 4096, 8192, 4095)))]
    if rng.random() < 0.1:
        parts.append("e=other-error")
    if rng.random() < 0.2:
        rng.shuffle(parts)
    return ",".join(parts).encode()


def _scram_client(mechanism):
    from pyprod.sasl.scram import ScramSaslClient
    c = ScramSaslClient(mechanism, "user", "pencil", nonce=_NONCE)
    c.first()
    return c


def _scram_after_first(mechanism, cache={}):  # noqa: B006 (a cache on purpose)
    if mechanism not in cache:
        c = _scram_client(mechanism)
        with cheap_pbkdf2():
            c.evaluate(("r=%s,s=QSXCR+Q6sek8bf92,i=4096" % _SERVER_NONCE).encode())
        cache[mechanism] = c
    return copy.copy(cache[mechanism])


def _scram_target():
    cases = [(m, step) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512") for step in ("first", "final")]

    def seed(case, rng, lie):
        mechanism, step = case
        if step == "first":
            return _server_first(rng)
        sig = _scram_after_first(mechanism)._server_signature
        if rng.random() < 0.1:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(sig if rng.random() < 0.8 else rng.randbytes(len(sig)))

    def run(case, data):
        mechanism, step = case
        c = _scram_client(mechanism) if step == "first" else _scram_after_first(mechanism)
        with cheap_pbkdf2():
            return c.evaluate(data)

    return Target("scram", cases, seed, run, doc="ScramSaslClient.evaluate")


def _oauth_challenge(rng, lie):
    if lie and rng.random() < lie:  # deep nesting, huge numbers
        depth = rng.choice((10, 1000, 100_000))
        return rng.choice((
            b'{"status":' + b"[" * depth + b"]" * depth + b"}",
            b'{"status":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}",
            b"[" * depth,
            b'{"status":' + b"9" * rng.choice((100, 4301, 10000)) + b"}",
        ))
    status = rng.choice(("invalid_token", "insufficient_scope", "", "\u00fc" * 3, 1, None))
    obj = {"status": status}
    if rng.random() < 0.5:
        obj["scope"] = "kafka"
    if rng.random() < 0.2:
        obj = rng.choice(([1, 2], "text", 3.5, None, {"other": 1}))
    return json.dumps(obj).encode()


def _oauthbearer_target():
    from pyprod.sasl.oauthbearer import OAuthBearerSaslClient

    def run(case, data):
        c = OAuthBearerSaslClient(None)
        return c.evaluate(data), c.error

    return Target("oauthbearer", [None], lambda case, rng, lie: _oauth_challenge(rng, lie), run,
                  doc="OAuthBearerSaslClient.evaluate")


class _Token:
    def token(self):
        return "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."


_SASL_CONFIG = {"sasl_plain_username": "user", "sasl_plain_password": "pencil",
                "sasl_oauth_token_provider": _Token()}
_BROKER_VERSIONS = {sasl_handshake.API_KEY: (0, 1), sasl_authenticate.API_KEY: (0, 2)}


def _sasl_target():
    from pyprod.sasl_authenticator import SaslClientAuthenticator
    mechanisms = ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER")
    cases = [(m, 17, 1) for m in mechanisms] + \
        [(m, 36, v) for m in mechanisms for v in _versions(sasl_authenticate)]

    def seed(case, rng, lie):
        mechanism, api_key, version = case
        if api_key == sasl_handshake.API_KEY:
            return _body(sasl_handshake, version, rng, lie)
        challenge = {"PLAIN": lambda: b"", "SCRAM-SHA-256": lambda: _server_first(rng),
                     "OAUTHBEARER": lambda: _oauth_challenge(rng, lie)}[mechanism]()
        return sasl_authenticate.API.encode_response(version, {
            "error_code": rng.choice((0, 0, 0, 58, 1, -1, 999)),
            "error_message": rng.choice((None, "bad", "")), "auth_bytes": challenge,
            "session_lifetime_ms": rng.choice((0, 60000, -1, 1 << 62))})

    def run(case, data):
        mechanism, api_key, version = case
        auth = SaslClientAuthenticator(dict(_SASL_CONFIG, sasl_mechanism=mechanism), "h", 1)
        auth.start(_BROKER_VERSIONS)
        if mechanism.startswith("SCRAM"):
            auth._mechanism = _scram_client(mechanism)
        with cheap_pbkdf2():
            request = auth.on_response(api_key, version, data)
        return request is None, auth.session_lifetime_ms, auth.reauth_at(0) is None

    return Target("sasl", cases, seed, run, doc="SaslClientAuthenticator.on_response")


def targets(pure=None):
    """{name: Target} for every decoder; ``pure`` picks kcore's implementation (default: the
    active one)."""
    import kcore
    if pure is None:
        pure = not kcore.EXTENSIONS
    found = [_frame_size_target(), _response_target()]
    found += [_message_target(m) for m in MESSAGE_MODULES]
    found += [_produce_codec_target(pure), _connection_target(), _network_client_target(),
              _scram_target(), _oauthbearer_target(), _sasl_target()]
    return {t.name: t for t in found}
