"""SASL/PLAIN (RFC 4616): one message, authzid empty, then the broker's verdict."""


class PlainSaslClient:
    name = "PLAIN"

    def __init__(self, username, password):
        self._username = username
        self._password = password

    def first(self):
        return b"\0" + self._username.encode("utf-8") + b"\0" + self._password.encode("utf-8")

    def evaluate(self, challenge):
        return None  # the broker answered without an error: authenticated

    def __repr__(self):
        return "<PlainSaslClient user=%r>" % (self._username,)
