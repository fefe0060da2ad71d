"""The client half of ``proxy_url`` / ``socks5_proxy``: SOCKS5 (RFC 1928) CONNECT, with no
authentication or username/password (RFC 1929).

A connection through a proxy connects its socket to the proxy, then runs a Socks5Handshake
(non-blocking, one step per readiness event, in the connection's HANDSHAKING state) before TLS,
if any; from then on the tunnel carries the broker's bytes unchanged. ``socks5://`` resolves
the broker's host name here (each address in turn, as a direct connection does);
``socks5h://`` sends the name for the proxy to resolve.

The proxy password is a secret: no repr, log line or exception shows it (``redact``).
"""
import ipaddress
import socket
import urllib.parse

from pyprod.errors import (KafkaConfigurationError, KafkaConnectionError,
                           ProxyAuthenticationError)

SCHEMES = ("socks5", "socks5h")
DEFAULT_PORT = 1080
_MAX_FIELD = 255  # RFC 1929: username and password are 1..255 bytes; RFC 1928: a domain too

_NO_AUTH, _USER_PASS, _NO_METHOD = 0x00, 0x02, 0xFF
_REPLIES = {1: "general SOCKS server failure", 2: "connection not allowed by ruleset",
            3: "network unreachable", 4: "host unreachable", 5: "connection refused",
            6: "TTL expired", 7: "command not supported", 8: "address type not supported"}
_ADDR_SIZE = {1: 4, 4: 16}  # ATYP -> address bytes (3: a length byte, then the name)


def redact(text):
    """A proxy URL (or any text holding one) with its password replaced by ``***``."""
    head, at, host = str(text).rpartition("@")
    if not at:
        return str(text)
    scheme, sep, userinfo = head.rpartition("://")
    user, colon, _ = userinfo.partition(":")
    return "%s%s%s%s@%s" % (scheme, sep, user, ":***" if colon else "", host)


class Socks5Proxy:
    """A parsed proxy URL: ``socks5[h]://[user:password@]host[:port]`` (port 1080 if left
    out; user and password percent-decoded). Bad URLs raise KafkaConfigurationError."""
    __slots__ = ("scheme", "host", "port", "username", "_password")

    def __init__(self, url, key="proxy_url"):
        if not isinstance(url, str):
            raise KafkaConfigurationError("%s must be a str such as 'socks5://host:1080', got %s"
                                          % (key, type(url).__name__))
        shown = redact(url)
        if "://" not in url:
            raise KafkaConfigurationError("%s requires scheme:// (%s)" % (key, shown))
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError as e:  # a bad port or bracketed host; the text may hold the password
            raise KafkaConfigurationError("Unable to parse %s %s: %s" % (
                key, shown, redact(e))) from None
        if parts.scheme not in SCHEMES:
            raise KafkaConfigurationError("Unsupported proxy url scheme: %s (pyprod supports %s)"
                                          % (parts.scheme, " and ".join(SCHEMES)))
        if not parts.hostname:
            raise KafkaConfigurationError("%s %s names no proxy host" % (key, shown))
        self.scheme, self.host = parts.scheme, parts.hostname
        self.port = DEFAULT_PORT if port is None else port
        self.username = _field(parts.username, "user name", key, shown)
        self._password = _field(parts.password, "password", key, shown)
        if (self.username is None) != (self._password is None):
            raise KafkaConfigurationError("%s %s: give both a user name and a password, or "
                                          "neither" % (key, shown))

    @property
    def remote_dns(self):
        """socks5h: the proxy resolves the broker's host name."""
        return self.scheme == "socks5h"

    def address(self):
        """The proxy's first address, as getaddrinfo gives it (KafkaConnectionError if none)."""
        try:
            return socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)[0]
        except (OSError, UnicodeError) as e:
            raise KafkaConnectionError("cannot resolve SOCKS5 proxy %s:%s: %s" % (
                self.host, self.port, e)) from None

    def credentials(self):
        """RFC 1929's request (the one place the password is read), or None."""
        if self.username is None:
            return None
        user, password = self.username.encode(), self._password.encode()
        return b"\x01" + bytes((len(user),)) + user + bytes((len(password),)) + password

    def __repr__(self):
        user = "" if self.username is None else "%s:***@" % self.username
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s%s:%d" % (self.scheme, user, host, self.port)

    __str__ = __repr__


def _field(text, what, key, shown):
    if text is None:
        return None
    value = urllib.parse.unquote(text)
    if not 0 < len(value.encode()) <= _MAX_FIELD:
        raise KafkaConfigurationError("%s %s: the %s must be 1 to %d bytes" % (
            key, shown, what, _MAX_FIELD))
    return value


def _connect_request(host, port):
    """CONNECT host:port; an IP literal goes as an address, a name as a domain (socks5h)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        name = host.encode("idna")
        if not 0 < len(name) <= _MAX_FIELD:
            raise KafkaConnectionError("host name %r is too long for SOCKS5" % (host,)) from None
        addr = b"\x03" + bytes((len(name),)) + name
    else:
        addr = (b"\x01" if ip.version == 4 else b"\x04") + ip.packed
    return b"\x05\x01\x00" + addr + port.to_bytes(2, "big")


class Socks5Handshake:
    """One connection's SOCKS5 exchange on its connected, non-blocking socket: greeting,
    authentication if the proxy picks it, CONNECT. ``step(sock)`` writes what is due and reads
    exactly what the reply needs (never a byte of the broker's); True once the tunnel is open.
    ``wants_write``: the next step waits for writability, else for readability."""
    __slots__ = ("proxy", "target", "wants_write", "_out", "_in", "_need", "_state")

    def __init__(self, proxy, host, port):
        self.proxy, self.target = proxy, (host, port)
        methods = bytes((_NO_AUTH, _USER_PASS)) if proxy.username is not None else b"\x00"
        self._out = b"\x05" + bytes((len(methods),)) + methods
        self._in = bytearray()
        self._need, self._state = 2, self._method
        self.wants_write = True

    def step(self, sock):
        while True:
            try:
                while self._out:
                    self._out = self._out[sock.send(self._out):]
                self.wants_write = False
                while len(self._in) < self._need:
                    chunk = sock.recv(self._need - len(self._in))
                    if not chunk:
                        raise KafkaConnectionError(
                            "SOCKS5 proxy %s closed the connection during the %s" % (
                                self._where(), self._state.__doc__))
                    self._in += chunk
            except (BlockingIOError, InterruptedError):
                self.wants_write = bool(self._out)
                return False
            got, self._in = bytes(self._in), bytearray()
            if self._state(got):
                return True

    def _where(self):
        return "%s:%s" % (self.proxy.host, self.proxy.port)

    def _expect(self, got, version, what):
        if got[0] != version:
            raise KafkaConnectionError("SOCKS5 proxy %s: bad %s (version byte %d): not a SOCKS5 "
                                       "proxy?" % (self._where(), what, got[0]))

    def _method(self, got):
        """method selection"""
        self._expect(got, 5, "greeting reply")
        if got[1] == _USER_PASS and self.proxy.username is not None:
            self._out, self._need, self._state = self.proxy.credentials(), 2, self._auth
        elif got[1] == _NO_AUTH:
            self._send_connect()
        elif self.proxy.username is None:
            raise ProxyAuthenticationError(
                "SOCKS5 proxy %s requires authentication: give a user name and password in the "
                "proxy URL (socks5://user:password@host:port)" % self._where())
        else:
            raise ProxyAuthenticationError("SOCKS5 proxy %s accepts none of our authentication "
                                           "methods (reply %d)" % (self._where(), got[1]))
        return False

    def _auth(self, got):
        """username/password authentication"""
        self._expect(got, 1, "authentication reply")
        if got[1] != 0:
            raise ProxyAuthenticationError("SOCKS5 proxy %s refused user %r (status %d)" % (
                self._where(), self.proxy.username, got[1]))
        self._send_connect()
        return False

    def _send_connect(self):
        self._out = _connect_request(*self.target)
        self._need, self._state = 4, self._reply

    def _reply(self, got):
        """CONNECT request"""
        self._expect(got, 5, "CONNECT reply")
        if got[1] != 0:
            raise KafkaConnectionError("SOCKS5 proxy %s could not connect to %s:%s: %s (reply %d)"
                                       % (self._where(), self.target[0], self.target[1],
                                          _REPLIES.get(got[1], "unknown error"), got[1]))
        if got[3] == 3:
            self._need, self._state = 1, self._bound_name
        elif got[3] in _ADDR_SIZE:
            self._need, self._state = _ADDR_SIZE[got[3]] + 2, self._bound
        else:
            raise KafkaConnectionError("SOCKS5 proxy %s: unknown address type %d in its CONNECT "
                                       "reply" % (self._where(), got[3]))
        return False

    def _bound_name(self, got):
        """CONNECT reply"""
        self._need, self._state = got[0] + 2, self._bound
        return False

    def _bound(self, got):
        """CONNECT reply"""
        return True  # the proxy's bound address: not needed
