"""format("pyprod")'s security options: JAAS strings, trust/key stores, host-name checks, and
no secret in any message or repr. No Spark session or broker here: the parsing and the store
conversion are plain Python (the end-to-end test is test_spark_security.py)."""
import os
import pickle
import ssl
import stat
import subprocess

import pytest

from pyprod.errors import KafkaConfigurationError
from pyprod.sasl.unsecured_jws import UnsecuredTokenProvider
from pyprod.spark import jaas, options, stores, writer
from pyprod.spark.producer_cache import config_key
from pyprod.local_broker.jars import java_executable
from tests.harness.security import make_certificates

SECRET = "Hunter2-s3cret"        # a password that must never show up anywhere
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9093"}


def parse(**opts):
    """options.parse over BASE plus ``opts`` ('kafka.' added, '_' -> '.')."""
    o = dict(BASE)
    o.update(("kafka." + k.replace("_", "."), v) for k, v in opts.items())
    return options.parse(o)[1]


def no_secret(text, *secrets):
    for s in (SECRET,) + secrets:
        assert s not in text, text


def raises_clean(fn, *needles, secrets=()):
    """fn() raises KafkaConfigurationError naming each needle and no secret."""
    with pytest.raises(KafkaConfigurationError) as e:
        fn()
    text = str(e.value) + repr(e.value)
    for n in needles:
        assert n in text, text
    no_secret(text, *secrets)
    return text


# -- JAAS ----------------------------------------------------------------------------------
@pytest.mark.parametrize("module,mechanism", [(PLAIN, "PLAIN"), (SCRAM, "SCRAM-SHA-256"),
                                              (SCRAM, "SCRAM-SHA-512")])
def test_user_password_modules(module, mechanism):
    text = '%s required username="alice" password="%s";' % (module, SECRET)
    cfg = jaas.to_configs(jaas.parse(text), mechanism)
    assert cfg == {"sasl_mechanism": mechanism, "sasl_plain_username": "alice",
                   "sasl_plain_password": SECRET}


def test_syntax_quotes_escapes_comments():
    text = r"""
        /* a block comment */ %s REQUIRED   // the flag in any case
        username=alice
        password='it\'s "q"\\\101\t'
        other  =  "a=b;c"
        username="alice2";
    """ % PLAIN
    module = jaas.parse(text)
    assert module.name == PLAIN and module.flag == "required"
    assert module.options == {"username": "alice2", "password": "it's \"q\"\\A\t",
                              "other": "a=b;c"}
    assert SECRET not in repr(module)


def test_bare_words_keep_backslashes_and_octal_rules():
    m = jaas.parse(r'%s optional a=x\y b="\0101" c="\477";' % PLAIN)
    # "\0101" is octal 010 then '1'; "\477" is octal 47 ('\'') then '7' (3 digits only from 0-3)
    assert m.options == {"a": r"x\y", "b": "\x081", "c": "'7"}


@pytest.mark.parametrize("text,needle", [
    ("", "no login module"),
    ("   // only a comment", "no login module"),
    ('%s required username="a" password="%s"' % (PLAIN, SECRET), "end with ';'"),
    ('%s username="a" password="%s";' % (PLAIN, SECRET), "control flag"),
    ('%s mandatory username="a" password="%s";' % (PLAIN, SECRET), "control flag"),
    ('%s required username="a" password=;' % PLAIN, "no value for option 'password'"),
    ('%s required username="a" password="%s" trailing;' % (PLAIN, SECRET),
     "after option 'password'"),
    ('%s required username="a" password=%s junk;' % (PLAIN, SECRET), "after option 'password'"),
    ('%s required password="%s\n";' % (PLAIN, SECRET), "not closed"),
    ('%s required username="a" password="%s"; %s required;' % (PLAIN, SECRET, SCRAM),
     "exactly one"),
    ('"%s" required;' % SECRET, "class name"),
    ('%s required username="a";' % PLAIN, "needs password"),
    ('%s required password="%s";' % (PLAIN, SECRET), "needs username"),
])
def test_bad_jaas_names_the_problem_never_the_secret(text, needle):
    raises_clean(lambda: jaas.to_configs(jaas.parse(text), "PLAIN"), needle,
                 "kafka.sasl.jaas.config")


def test_other_login_module_fails_naming_it():
    text = 'com.example.MyLoginModule required password="%s";' % SECRET
    raises_clean(lambda: parse(sasl_mechanism="PLAIN", sasl_jaas_config=text),
                 "com.example.MyLoginModule", "not supported")


def test_mechanism_inferred_or_checked():
    plain = '%s required username="a" password="%s";' % (PLAIN, SECRET)
    assert parse(sasl_jaas_config=plain)["sasl_mechanism"] == "PLAIN"
    scram = '%s required username="a" password="%s";' % (SCRAM, SECRET)
    raises_clean(lambda: parse(sasl_jaas_config=scram), "kafka.sasl.mechanism",
                 "SCRAM-SHA-256 or SCRAM-SHA-512")
    raises_clean(lambda: parse(sasl_mechanism="PLAIN", sasl_jaas_config=scram),
                 "does not go with", SCRAM)


def test_shaded_module_names():
    text = 'kafkashaded.%s required username="a" password="%s";' % (PLAIN, SECRET)
    assert parse(sasl_jaas_config=text)["sasl_plain_password"] == SECRET


def test_scram_delegation_tokens_unsupported():
    text = '%s required username="a" password="%s" tokenauth=true;' % (SCRAM, SECRET)
    raises_clean(lambda: jaas.to_configs(jaas.parse(text), "SCRAM-SHA-256"), "tokenauth")


def test_oauthbearer_unsecured_login():
    text = ('%s required unsecuredLoginStringClaim_sub="alice" '
            'unsecuredLoginLifetimeSeconds="120" unsecuredLoginExtension_traceId="42";' % OAUTH)
    cfg = parse(sasl_jaas_config=text)
    provider = cfg["sasl_oauth_token_provider"]
    assert cfg["sasl_mechanism"] == "OAUTHBEARER"
    assert provider == UnsecuredTokenProvider("alice", lifetime_seconds=120,
                                              extensions={"traceId": "42"})
    assert provider.extensions() == {"traceId": "42"}
    raises_clean(lambda: parse(sasl_jaas_config="%s required;" % OAUTH), "principal")
    raises_clean(lambda: parse(sasl_jaas_config='%s required clientId="c";' % OAUTH),
                 "clientSecret")  # client credentials: tests/security/test_oidc_spark.py


def test_kerberos_ticket_cache_maps_keytab_fails():
    text = '%s required useTicketCache=true serviceName="kafka";' % KRB5
    cfg = jaas.to_configs(jaas.parse(text))
    assert cfg == {"sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka"}
    raises_clean(lambda: jaas.to_configs(jaas.parse(
        '%s required useKeyTab=true keyTab="/etc/k.keytab" principal="c@R";' % KRB5)),
        "kinit -kt", "KRB5_CLIENT_KTNAME")
    raises_clean(lambda: jaas.to_configs(jaas.parse(
        '%s required ticketCache="/tmp/cc";' % KRB5)), "KRB5CCNAME")
    # serviceName in JAAS and in kafka.sasl.kerberos.service.name must agree (as in Kafka)
    raises_clean(lambda: parse(sasl_kerberos_service_name="other", sasl_jaas_config=text),
                 "kafka.sasl.jaas.config", "kafka.sasl.kerberos.service.name")


def test_jaas_and_explicit_credentials_conflict():
    text = '%s required username="a" password="%s";' % (PLAIN, SECRET)
    raises_clean(lambda: parse(sasl_jaas_config=text, sasl_plain_username="b"),
                 "kafka.sasl.jaas.config", "kafka.sasl.plain.username")
    # the same value twice is no conflict
    assert parse(sasl_jaas_config=text, sasl_plain_username="a")["sasl_plain_username"] == "a"


# -- stores --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(str(tmp_path_factory.mktemp("certs")), password=SECRET)


def keytool(*args):
    tool = os.path.join(os.path.dirname(os.path.realpath(java_executable())), "keytool")
    subprocess.run([tool, *args], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def java_stores(certs, tmp_path_factory):
    """Stores made by Java's keytool: a JKS truststore and a PKCS12 truststore."""
    d = tmp_path_factory.mktemp("java")
    out = {}
    for kind in ("JKS", "PKCS12"):
        path = str(d / ("trust." + kind.lower()))
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", certs.ca_file,
                "-keystore", path, "-storetype", kind, "-storepass", SECRET)
        out[kind] = path
    return out


def truststore(location, **extra):
    return parse(security_protocol="SSL", ssl_truststore_location=location, **extra)


def keystore(location, **extra):
    return parse(security_protocol="SSL", ssl_keystore_location=location, **extra)


@pytest.fixture
def written(monkeypatch):
    """The PEM files a conversion writes: {name: (bytes, file mode, directory mode)}; each
    must be gone once materialize() returns."""
    files, paths = {}, []
    real = stores._write

    def spy(directory, name, data):
        path = real(directory, name, data)
        files[name] = (data, stat.S_IMODE(os.stat(path).st_mode),
                       stat.S_IMODE(os.stat(directory).st_mode))
        paths.append(path)
        return path

    monkeypatch.setattr(stores, "_write", spy)
    yield files
    for path in paths:
        assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


def materialized(cfg):
    return stores.materialize(cfg)


def subjects(ctx):
    return [c["subject"] for c in ctx.get_ca_certs()]


def ca_subject(certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=certs.ca_file)
    return subjects(ctx)


def private(entry):
    _, file_mode, dir_mode = entry
    assert (file_mode, dir_mode) == (0o600, 0o700)


def test_pem_truststore_used_in_place(certs):
    cfg = truststore(certs.ca_file, ssl_truststore_type="PEM")
    assert isinstance(cfg["ssl_cafile"], stores.Store)
    assert materialized(cfg)["ssl_cafile"] == certs.ca_file
    raises_clean(lambda: truststore(certs.ca_file, ssl_truststore_type="PEM",
                                    ssl_truststore_password=SECRET),
                 "kafka.ssl.truststore.password", "PEM")


@pytest.mark.parametrize("maker", ["cryptography", "keytool"])
def test_pkcs12_truststore_converted(certs, java_stores, maker, written):
    location = certs.truststore_p12 if maker == "cryptography" else java_stores["PKCS12"]
    cfg = truststore(location, ssl_truststore_type="PKCS12", ssl_truststore_password=SECRET)
    no_secret(repr(cfg))
    out = materialized(cfg)
    assert "ssl_cafile" not in out and isinstance(out["ssl_context"], ssl.SSLContext)
    assert subjects(out["ssl_context"]) == ca_subject(certs)
    assert out["ssl_context"].check_hostname  # built as pyprod.ssl_factory builds it
    private(written["truststore.pem"])


def test_stores_unused_without_tls(certs, written):
    cfg = parse(ssl_truststore_location=certs.truststore_p12, ssl_truststore_password=SECRET,
                ssl_endpoint_identification_algorithm="")
    assert materialized(cfg) == {"bootstrap_servers": "127.0.0.1:9093",
                                 "ssl_check_hostname": False}
    assert written == {}


def test_type_sniffed_when_absent(certs):
    assert truststore(certs.truststore_p12, ssl_truststore_password=SECRET)[
        "ssl_cafile"].type == "PKCS12"
    assert truststore(certs.ca_file)["ssl_cafile"].type == "PEM"


def test_file_only_on_executors(certs, tmp_path, written):
    """A location the driver cannot read is checked on the executor; its name's suffix or,
    failing that, its content gives the type."""
    later = tmp_path / "later.bin"
    cfg = truststore(str(later), ssl_truststore_password=SECRET)
    assert cfg["ssl_cafile"].type is None
    assert truststore(str(tmp_path / "x.p12"))["ssl_cafile"].type == "PKCS12"
    raises_clean(lambda: materialized(cfg), "cannot be read")
    later.write_bytes(open(certs.truststore_p12, "rb").read())
    assert subjects(materialized(cfg)["ssl_context"]) == ca_subject(certs)
    assert written["truststore.pem"][0].count(b"BEGIN CERTIFICATE") == 1


def test_wrong_pkcs12_password_fails_on_the_driver(certs):
    raises_clean(lambda: truststore(certs.truststore_p12, ssl_truststore_type="PKCS12",
                                    ssl_truststore_password="wrong-" + SECRET),
                 "kafka.ssl.truststore.password", secrets=("wrong-" + SECRET,))


def test_jks_fails_early_with_the_conversion(java_stores, tmp_path):
    for extra in ({}, {"ssl_truststore_type": "JKS"}, {"ssl_truststore_type": "PKCS12"}):
        text = raises_clean(lambda: truststore(java_stores["JKS"], **extra), "JKS",
                            "keytool -importkeystore", "-deststoretype PKCS12")
        assert java_stores["JKS"] in text
    # a JKS type fails even where the file is not readable on the driver
    raises_clean(lambda: truststore(str(tmp_path / "absent"), ssl_truststore_type="jks"),
                 "keytool")
    raises_clean(lambda: truststore(str(tmp_path / "absent.jks")), "keytool")
    raises_clean(lambda: truststore(str(tmp_path / "a"), ssl_truststore_type="BCFKS"),
                 "PEM or PKCS12")


def test_pkcs12_keystore_for_mtls(certs, written):
    cfg = keystore(certs.keystore_p12, ssl_keystore_type="PKCS12",
                   ssl_keystore_password=SECRET, ssl_key_password=SECRET,
                   ssl_truststore_location=certs.ca_file)
    no_secret(repr(cfg["ssl_certfile"]))
    out = materialized(cfg)
    assert isinstance(out["ssl_context"], ssl.SSLContext)
    assert not {"ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_cafile"} & set(out)
    assert subjects(out["ssl_context"]) == ca_subject(certs)  # the PEM truststore, in there
    key, crt = written["keystore.key.pem"], written["keystore.crt.pem"]
    private(key)
    private(crt)
    assert b"ENCRYPTED PRIVATE KEY" in key[0]
    assert crt[0].count(b"BEGIN CERTIFICATE") == 2  # the client cert and the CA


def test_pem_keystores(certs, tmp_path, written):
    cfg = keystore(certs.keystore_pem, ssl_keystore_type="PEM")
    assert materialized(cfg) == {**{k: v for k, v in cfg.items() if k != "ssl_certfile"},
                                 "ssl_certfile": certs.keystore_pem}
    encrypted = tmp_path / "enc.pem"
    encrypted.write_bytes(open(certs.client_key_encrypted, "rb").read()
                          + open(certs.client_cert, "rb").read())
    cfg = keystore(str(encrypted), ssl_keystore_type="PEM", ssl_key_password=SECRET)
    out = materialized(cfg)
    assert out["ssl_certfile"] == str(encrypted) and out["ssl_password"] == SECRET
    assert written == {}  # PEM is used in place
    raises_clean(lambda: keystore(str(encrypted), ssl_keystore_type="PEM"),
                 "kafka.ssl.key.password")
    raises_clean(lambda: keystore(str(encrypted), ssl_keystore_type="PEM",
                                  ssl_keystore_password=SECRET, ssl_key_password=SECRET),
                 "kafka.ssl.keystore.password")


def test_key_password_alone_is_ssl_password():
    assert parse(ssl_key_password=SECRET)["ssl_password"] == SECRET


def test_store_and_pyprod_file_options_conflict(certs):
    raises_clean(lambda: parse(ssl_truststore_location=certs.ca_file, ssl_cafile=certs.ca_file),
                 "kafka.ssl.truststore.location", "kafka.ssl.cafile")
    raises_clean(lambda: keystore(certs.keystore_pem, ssl_keyfile=certs.client_key),
                 "kafka.ssl.keystore.location", "kafka.ssl.keyfile")


@pytest.mark.parametrize("value,check", [("", False), ("https", True), ("HTTPS", True)])
def test_endpoint_identification(value, check):
    assert parse(ssl_endpoint_identification_algorithm=value)["ssl_check_hostname"] is check


def test_endpoint_identification_bad_value():
    raises_clean(lambda: parse(ssl_endpoint_identification_algorithm="ldaps"), "'https'")


# -- everything together, the cache key, publish(), reprs ------------------------------------
def full_options(certs):
    return {
        "kafka.bootstrap.servers": "127.0.0.1:9093",
        "topic": "t",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": '%s required username="alice" password="%s";'
                                  % (SCRAM, SECRET),
        "kafka.ssl.truststore.location": certs.truststore_p12,
        "kafka.ssl.truststore.type": "PKCS12",
        "kafka.ssl.truststore.password": SECRET,
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.linger.ms": "5",
    }


def test_full_sasl_ssl_options(certs):
    topic, cfg = options.parse(full_options(certs))
    assert topic == "t"
    assert cfg == {"bootstrap_servers": "127.0.0.1:9093", "security_protocol": "SASL_SSL",
                   "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
                   "sasl_plain_password": SECRET, "linger_ms": 5, "ssl_check_hostname": False,
                   "ssl_cafile": stores.Store("truststore", certs.truststore_p12, "PKCS12",
                                              SECRET)}


def test_cache_key_stable_across_tasks(certs):
    """Tasks get unpickled copies of the settings: equal options, equal producer cache key
    (so one producer per worker), whatever was converted in between."""
    _, a = options.parse(full_options(certs))
    copy = pickle.loads(pickle.dumps(a))
    materialized(copy)
    assert config_key(copy) == config_key(a) == config_key(options.parse(full_options(certs))[1])
    other = dict(full_options(certs), **{"kafka.ssl.truststore.location": certs.ca_file,
                                         "kafka.ssl.truststore.type": "PEM"})
    other.pop("kafka.ssl.truststore.password")
    assert config_key(options.parse(other)[1]) != config_key(a)


def test_publish_takes_dotted_option_names(certs):
    kwargs = {k: v for k, v in full_options(certs).items() if k != "topic"}
    kwargs.pop("kafka.bootstrap.servers")
    cfg = options.python_configs(dict(kwargs, bootstrap_servers="127.0.0.1:9093", linger_ms=5))
    assert cfg == options.parse(full_options(certs))[1]
    raises_clean(lambda: options.python_configs(dict(
        kwargs, bootstrap_servers="h:1", sasl_plain_password="other")),
        "sasl_plain_password")


def test_no_secret_in_reprs(certs):
    _, cfg = options.parse(full_options(certs))
    settings = writer.SinkSettings("t", cfg)
    no_secret(repr(settings) + repr(cfg["ssl_cafile"]))


@pytest.mark.parametrize("name,secret", [
    ("kafka.ssl.truststore.password", True), ("kafka.ssl.key.password", True),
    ("kafka.sasl.plain.password", True), ("ssl_password", True),
    ("kafka.sasl.jaas.config", True), ("kafka.linger.ms", False),
    ("kafka.enable.idempotence", False)])
def test_secret_options(name, secret):
    """Values of secret options are never echoed; others are, where they help."""
    assert options.security.is_secret(name) is secret


def test_bad_value_of_a_plain_option_is_shown():
    text = raises_clean(lambda: options.parse(dict(BASE, **{"kafka.enable.idempotence": "maybe"})),
                        "kafka.enable.idempotence", "true or false")
    assert "'maybe'" in text


def test_nothing_logged_with_a_secret(certs, caplog):
    """Parsing on the driver and building the producer's TLS setup on an executor log
    nothing that holds a secret (at any level)."""
    caplog.set_level("DEBUG")
    opts = full_options(certs)
    opts["kafka.ssl.keystore.location"] = certs.keystore_p12
    opts["kafka.ssl.keystore.password"] = SECRET
    _, cfg = options.parse(opts)
    stores.materialize(cfg)
    with pytest.raises(KafkaConfigurationError):
        options.parse(dict(opts, **{"kafka.ssl.truststore.password": "wrong-" + SECRET}))
    no_secret("\n".join(r.getMessage() for r in caplog.records), "wrong-" + SECRET)
