"""SASL challenges from the broker: malformed SCRAM server messages and OAUTHBEARER error JSON
give typed errors (SaslAuthenticationFailedError, KafkaProtocolError), never IndexError,
ValueError, UnicodeDecodeError, binascii.Error, KeyError or RecursionError."""
import base64

import pytest

from pyprod.errors import KafkaProtocolError, SaslAuthenticationFailedError
from pyprod.protocol import sasl_authenticate
from pyprod.sasl.oauthbearer import OAuthBearerSaslClient
from pyprod.sasl.scram import ScramSaslClient
from pyprod.sasl_authenticator import SaslClientAuthenticator

NONCE = "fyko+d2lbbFgONRv9qkxdawL"
SALT = base64.b64encode(b"salt").decode()
GOOD_FIRST = ("r=%s-server,s=%s,i=4096" % (NONCE, SALT)).encode()

BAD_SERVER_FIRST = [
    b"", b",", b"=", b"r", b"\xff\xfe", b"r=\xc3", GOOD_FIRST + b"\xff",
    b"e=unknown-user",
    ("r=%s,s=%s,i=4096" % (NONCE, SALT)).encode(),            # no server part in the nonce
    ("r=other,s=%s,i=4096" % SALT).encode(),                   # not our nonce
    ("r=%s-x,i=4096" % NONCE).encode(),                        # no salt
    ("r=%s-x,s=%s" % (NONCE, SALT)).encode(),                  # no iteration count
    ("r=%s-x,s=%s,i=" % (NONCE, SALT)).encode(),
    ("r=%s-x,s=%s,i=4e3" % (NONCE, SALT)).encode(),
    ("r=%s-x,s=%s,i=%s" % (NONCE, SALT, "9" * 5000)).encode(),  # past int()'s digit limit
    ("r=%s-x,s=%s,i=4095" % (NONCE, SALT)).encode(),           # below Kafka's minimum
    ("r=%s-x,s=%s,i=-4096" % (NONCE, SALT)).encode(),
    ("r=%s-x,s=%s,i=99999999999" % (NONCE, SALT)).encode(),
    ("r=%s-x,s=c2FsdA,i=4096" % NONCE).encode(),               # bad base64 padding
    ("r=%s-x,s=%%%%%%%%,i=4096" % NONCE).encode(),             # not base64
    ("r=%s-x,s=\u00e9\u00e9\u00e9\u00e9,i=4096" % NONCE).encode(),  # non-ASCII salt
]


@pytest.mark.parametrize("challenge", BAD_SERVER_FIRST)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_malformed_server_first(mechanism, challenge):
    client = ScramSaslClient(mechanism, "user", "pencil", nonce=NONCE)
    client.first()
    with pytest.raises(SaslAuthenticationFailedError):
        client.evaluate(challenge)


@pytest.mark.parametrize("challenge", [
    b"", b"v=", b"v=%%%%", b"v=\xff", b"v=\xc3\xa9", b"v=AAAA", b"e=invalid-proof", b"x",
    b"v=" + base64.b64encode(b"\x00" * 32), b",,,,", b"v=" + b"A" * 100_000])
def test_scram_malformed_server_final(challenge):
    client = ScramSaslClient("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    client.first()
    client.evaluate(GOOD_FIRST)
    with pytest.raises(SaslAuthenticationFailedError):
        client.evaluate(challenge)


@pytest.mark.parametrize("challenge", [
    b"[" * 100_000,                                    # nested past the JSON parser's depth
    b'{"status":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"status":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001,
    b'{"status":' + b"9" * 5000 + b"}",                # past int()'s digit limit
    b"\xff\xfe", b"not json", b"[1, 2]", b'"text"', b"null", b"{}"])
def test_oauthbearer_malformed_error_challenge(challenge):
    """The broker's error challenge is only read for its status: anything else is
    'invalid_token', and the client answers with the lone kvsep (RFC 7628)."""
    client = OAuthBearerSaslClient(None)
    assert client.evaluate(challenge) == b"\x01"
    assert client.error == "invalid_token"


def test_oauthbearer_status_is_kept_short():
    client = OAuthBearerSaslClient(None)
    client.evaluate(b'{"status":"' + b"x" * 1000 + b'"}')
    assert client.error == "x" * 100


class _Token:
    def token(self):
        return "token"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
@pytest.mark.parametrize("body", [b"", b"\x00", b"\x00\x00\xff\xff\x7f\xff\xff\xff",
                                  b"\x00\x00\x00\x00\x80\x00\x00\x00"])
def test_authenticator_malformed_saslauthenticate(mechanism, body):
    config = {"sasl_mechanism": mechanism, "sasl_plain_username": "u",
              "sasl_plain_password": "p", "sasl_oauth_token_provider": _Token()}
    auth = SaslClientAuthenticator(config, "h", 1)
    auth.start({17: (0, 1), 36: (0, 2)})
    with pytest.raises(KafkaProtocolError):
        auth.on_response(sasl_authenticate.API_KEY, 1, body)
