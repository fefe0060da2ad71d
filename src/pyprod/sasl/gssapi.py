"""SASL/GSSAPI (Kerberos, RFC 4752) through the ``gssapi`` package, as kafka-python does.

Context tokens go back and forth until the GSS context is established; then the broker sends a
wrapped 4-byte offer (security layers, max size) and the client answers, wrapped, with "no
security layer" (Kafka supports none), the same size and its principal as authorization id.
"""
from pyprod.errors import SaslAuthenticationFailedError

_NO_SECURITY_LAYER = 1


def _gss_failed(what, e):
    return SaslAuthenticationFailedError("GSSAPI %s failed: %s" % (what, e))


class GssapiSaslClient:
    name = "GSSAPI"

    def __init__(self, service_name, host, kerberos_name=None):
        import gssapi
        self._gssapi = gssapi
        self.service = "%s@%s" % (service_name, host)
        try:
            target = gssapi.Name(self.service, name_type=gssapi.NameType.hostbased_service)
            creds = None
            if kerberos_name is not None:
                principal = kerberos_name if isinstance(kerberos_name, gssapi.Name) else \
                    gssapi.Name(kerberos_name, name_type=gssapi.NameType.kerberos_principal)
                creds = gssapi.Credentials(name=principal, usage="initiate")
            self._ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate",
                                               mech=gssapi.MechType.kerberos)
        except gssapi.exceptions.GSSError as e:
            raise _gss_failed("setup for %s" % self.service, e) from None
        self._done = False

    def first(self):
        return self._step(None)

    def _step(self, token):
        try:
            return self._ctx.step(token) or b""
        except self._gssapi.exceptions.GSSError as e:
            raise _gss_failed("context with %s" % self.service, e) from None

    def evaluate(self, challenge):
        if self._done:
            return None
        if not self._ctx.complete:
            return self._step(bytes(challenge))
        try:  # the security-layer negotiation
            offer = self._ctx.unwrap(bytes(challenge)).message
            if len(offer) != 4 or not offer[0] & _NO_SECURITY_LAYER:
                raise SaslAuthenticationFailedError(
                    "GSSAPI: the broker offers no 'no security layer' option")
            answer = bytes([_NO_SECURITY_LAYER]) + offer[1:] + \
                str(self._ctx.initiator_name).encode("utf-8")
            self._done = True
            return self._ctx.wrap(answer, False).message
        except self._gssapi.exceptions.GSSError as e:
            raise _gss_failed("security layer negotiation", e) from None

    def __repr__(self):
        return "<GssapiSaslClient %s>" % self.service
