"""``kafka.sasl.jaas.config`` -> pyprod's SASL keys.

The syntax is Kafka's (JaasConfig, a java.io.StreamTokenizer)::

    <login module class> <control flag> (<key>=<value>)* ;

- Whitespace is every character up to ' '; ';' and '=' stand alone.
- A value is a bare word or a quoted string ('...' or "..."). Quoted strings take Java's
  escapes: \\n \\t \\r \\b \\f \\a \\v, octal \\0-\\377, and \\<c> for any other c (\\" -> ").
  Bare words are taken as written (a backslash is a backslash).
- '/' starts a comment (// and /* */ too), so a path must be quoted.
- A client uses exactly one login module; the control flag is required, requisite, sufficient
  or optional (any case). A key given twice keeps its last value.
- Unlike Java, a quoted string must end on its line.

The login modules pyprod maps (a ``kafkashaded.`` package prefix is allowed):

- PlainLoginModule and ScramLoginModule: ``username``/``password`` -> sasl_plain_username /
  sasl_plain_password. SCRAM delegation tokens (``tokenauth=true``) are not supported.
- OAuthBearerLoginModule: the unsecured login options (``unsecuredLogin*``) ->
  sasl_oauth_token_provider=UnsecuredTokenProvider; the client credentials (``clientId``,
  ``clientSecret``, ``scope``, ``extension_<name>``) -> sasl_oauthbearer_client_id /
  _client_secret / _scope / _extensions, the endpoint from
  ``kafka.sasl.oauthbearer.token.endpoint.url`` (pyprod.sasl.oidc_token_provider).
- Krb5LoginModule: GSSAPI with the Kerberos ticket cache of the executor's user (kinit there
  first; KRB5CCNAME picks another cache); ``serviceName`` -> sasl_kerberos_service_name.
  pyprod has no keytab login: ``useKeyTab``/``keyTab`` and ``ticketCache`` fail, saying to
  run ``kinit -kt`` on each executor or to set KRB5_CLIENT_KTNAME / KRB5CCNAME through
  spark.executorEnv.

Any other module fails, naming it. No message here ever shows an option's value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyprod.errors import KafkaConfigurationError
from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider

OPTION = "kafka.sasl.jaas.config"

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KERBEROS = "com.sun.security.auth.module.Krb5LoginModule"
_SHADED = "kafkashaded."
# login module -> the SASL mechanisms it serves (the first is the one to assume if unset)
MECHANISMS = {
    PLAIN: ("PLAIN",),
    SCRAM: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    OAUTHBEARER: ("OAUTHBEARER",),
    KERBEROS: ("GSSAPI",),
}
FLAGS = ("required", "requisite", "sufficient", "optional")

_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*\Z")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_WORD, _QUOTED = "word", "quoted"


@dataclass(frozen=True)
class LoginModule:
    """One parsed entry. The repr leaves the option values out."""
    name: str
    flag: str
    options: dict = field(repr=False, compare=True, hash=False)

    def __repr__(self):
        return "LoginModule(%r, %r, options=%s)" % (self.name, self.flag, sorted(self.options))


def _error(message):
    return KafkaConfigurationError("option %r: %s" % (OPTION, message))


def _is_word_char(c):
    o = ord(c)
    return o > 32 and c not in ";=/\"'" and not 128 < o < 160


def _quoted(text, i, quote):
    """The string opened by ``quote`` at text[i - 1]: (value, index after the close)."""
    out = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c in "\r\n":
            break
        if c == "\\" and i + 1 < n:
            i += 1
            c = text[i]
            if "0" <= c <= "7":  # octal: up to 3 digits, 3 only when the first is 0-3
                digits = 3 if c <= "3" else 2
                j = i
                while j < n and j - i < digits and "0" <= text[j] <= "7":
                    j += 1
                out.append(chr(int(text[i:j], 8)))
                i = j
                continue
            out.append(_ESCAPES.get(c, c))
        else:
            out.append(c)
        i += 1
    raise _error("a quoted value is not closed on its line")


def tokens(text):
    """The StreamTokenizer tokens of ``text``: (kind, value) with kind 'word', 'quoted' or
    the character ';' / '='."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # '//' or a lone '/': to the end of the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            yield _QUOTED, value
        elif c in ";=":
            yield c, c
            i += 1
        elif _is_word_char(c):
            j = i
            while j < n and _is_word_char(text[j]):
                j += 1
            yield _WORD, text[i:j]
            i = j
        else:
            raise _error("unexpected character U+%04X" % ord(c))


def parse(text):
    """The one LoginModule of a client's JAAS config string."""
    if not isinstance(text, str):
        raise _error("must be a string")
    toks = list(tokens(text))
    entries, i = [], 0
    while i < len(toks):
        entry, i = _entry(toks, i)
        entries.append(entry)
    if not entries:
        raise _error("no login module given (expected '<LoginModule class> required "
                     "key=\"value\" ...;')")
    if len(entries) != 1:
        raise _error("has %d login modules; a client uses exactly one" % len(entries))
    return entries[0]


def _entry(toks, i):
    kind, name = toks[i]
    if kind not in (_WORD, _QUOTED) or not _CLASS_NAME.match(name):
        raise _error("expected a login module class name first")
    if i + 1 >= len(toks) or toks[i + 1][0] not in (_WORD, _QUOTED):
        raise _error("no control flag after the login module (e.g. 'required')")
    flag = toks[i + 1][1].lower()
    if flag not in FLAGS:
        raise _error("the control flag must be one of %s" % ", ".join(FLAGS))
    options, i, last = {}, i + 2, None
    while i < len(toks) and toks[i][0] != ";":
        # a key is only named once it is followed by '=': anything else may be a stray
        # piece of a value, which is not shown
        if toks[i][0] not in (_WORD, _QUOTED) or i + 1 >= len(toks) or toks[i + 1][0] != "=":
            where = "after option %r" % (last,) if last else "after the control flag"
            raise _error("expected key=value %s" % (where,))
        key = toks[i][1]
        if i + 2 >= len(toks) or toks[i + 2][0] not in (_WORD, _QUOTED):
            raise _error("no value for option %r" % (key,))
        options[key] = toks[i + 2][1]
        last = key
        i += 3
    if i >= len(toks):
        raise _error("the login module's entry must end with ';'")
    return LoginModule(name, flag, options), i + 1


# -- login module -> pyprod configs ----------------------------------------------------------
def _true(options, key):
    return str(options.get(key, "")).strip().lower() == "true"


def _user_password(module, options):
    missing = [k for k in ("username", "password") if not options.get(k)]
    if missing:
        raise _error("%s needs %s" % (module.name.rsplit(".", 1)[-1], " and ".join(missing)))
    return {"sasl_plain_username": options["username"],
            "sasl_plain_password": options["password"]}


def _scram(module, options):
    if _true(options, "tokenauth"):
        raise _error("ScramLoginModule with tokenauth=true (delegation tokens) is not "
                     "supported by pyprod")
    return _user_password(module, options)


def _oauthbearer(module, options):
    if any(k in options for k in ("clientId", "clientSecret")):
        return _client_credentials(options)
    try:
        provider = UnsecuredTokenProvider.from_options(options)
    except KafkaConfigurationError as e:
        raise _error("OAuthBearerLoginModule: %s" % (e.args[0],)) from None
    return {"sasl_oauth_token_provider": provider}


def _client_credentials(options):
    """clientId/clientSecret/scope and extension_<name> options (Java's KIP-768 login); the
    endpoint comes from kafka.sasl.oauthbearer.token.endpoint.url."""
    missing = [k for k in ("clientId", "clientSecret") if not options.get(k)]
    if missing:
        raise _error("OAuthBearerLoginModule needs %s" % " and ".join(missing))
    out = {"sasl_oauthbearer_client_id": options["clientId"],
           "sasl_oauthbearer_client_secret": options["clientSecret"]}
    if options.get("scope"):
        out["sasl_oauthbearer_scope"] = options["scope"]
    ext = {k[len("extension_"):]: v for k, v in options.items() if k.startswith("extension_")}
    if ext:
        out["sasl_oauthbearer_extensions"] = ext
    return out


def _kerberos(module, options):
    if _true(options, "useKeyTab") or "keyTab" in options:
        raise _error("Krb5LoginModule with a keytab is not supported by pyprod: run "
                     "'kinit -kt <keytab> <principal>' on each executor, or set "
                     "spark.executorEnv.KRB5_CLIENT_KTNAME=<keytab path>, and use "
                     "useTicketCache=true")
    if "ticketCache" in options:
        raise _error("Krb5LoginModule's ticketCache is not supported by pyprod: set "
                     "spark.executorEnv.KRB5CCNAME=<ticket cache> instead")
    out = {}
    if options.get("serviceName"):
        out["sasl_kerberos_service_name"] = options["serviceName"]
    return out


_MAPPERS = {PLAIN: _user_password, SCRAM: _scram, OAUTHBEARER: _oauthbearer,
            KERBEROS: _kerberos}


def module_class(module):
    """The login module's class without a ``kafkashaded.`` prefix."""
    name = module.name
    return name[len(_SHADED):] if name.startswith(_SHADED) else name


def to_configs(module, mechanism=None):
    """pyprod keys for ``module`` (a LoginModule), with sasl_mechanism: ``mechanism`` (the
    kafka.sasl.mechanism option, checked against the module) or the module's own when it
    has only one."""
    cls = module_class(module)
    mapper = _MAPPERS.get(cls)
    if mapper is None:
        raise _error("login module %r is not supported by pyprod; supported: %s" % (
            module.name, ", ".join(sorted(_MAPPERS))))
    allowed = MECHANISMS[cls]
    if mechanism is None:
        if len(allowed) > 1:
            raise _error("%s needs option 'kafka.sasl.mechanism' (%s)" % (
                cls.rsplit(".", 1)[-1], " or ".join(allowed)))
        mechanism = allowed[0]
    elif mechanism.upper() not in allowed:
        raise _error("login module %r does not go with kafka.sasl.mechanism=%s (expected %s)"
                     % (module.name, mechanism, " or ".join(allowed)))
    out = mapper(module, module.options)
    out["sasl_mechanism"] = mechanism
    return out
