"""An MIT Kerberos KDC on 127.0.0.1 for GSSAPI tests (realm PYPROD.TEST), in its own temp dir.

``KerberosKDC().start()`` creates the database, the broker principals
``kafka/127.0.0.1@PYPROD.TEST`` and ``kafka/localhost@PYPROD.TEST`` (both in
``broker_keytab``) and a client principal (``client_principal`` in ``client_keytab``), and
runs ``krb5kdc`` on a free port (UDP and TCP). ``client_env()`` is the environment a Python
gssapi client needs to get a ticket from the client keytab on its own; ``jvm_opts()`` the
JVM options of a broker. Needs the Debian packages krb5-kdc, krb5-admin-server, krb5-user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

from pyprod.local_broker.processes import free_ports, live, spawn, terminate

__all__ = ["KerberosKDC", "KDCUnavailable", "REALM"]

REALM = "PYPROD.TEST"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


class KDCUnavailable(RuntimeError):
    """The MIT Kerberos KDC tools are not installed."""


def _tool(name: str) -> str:
    found = shutil.which(name) or next(
        (os.path.join(d, name) for d in _SBIN if os.access(os.path.join(d, name), os.X_OK)), None)
    if not found:
        raise KDCUnavailable(f"`{name}` not found: install the Debian packages krb5-kdc "
                             "krb5-admin-server krb5-user (scripts/setup.sh does)")
    return found


def _udp_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_KRB5_CONF = """\
[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ignore_acceptor_hostname = true
    forwardable = true
    ticket_lifetime = 24h
    default_ccache_name = FILE:{dir}/ccache

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{port}
        admin_server = 127.0.0.1:{port}
    }}

[domain_realm]
    127.0.0.1 = {realm}
    localhost = {realm}
"""

_KDC_CONF = """\
[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {realm} = {{
        database_name = {dir}/principal
        key_stash_file = {dir}/stash
        acl_file = {dir}/kadm5.acl
        kdc_listen = 127.0.0.1:{port}
        kdc_tcp_listen = 127.0.0.1:{port}
        max_life = 24h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{dir}/kdc.log
    default = FILE:{dir}/kdc.log
"""


class KerberosKDC:
    """MIT ``krb5kdc`` on 127.0.0.1; ``stop()`` removes its directory."""

    realm = REALM

    def __init__(self, broker_hosts=("127.0.0.1", "localhost"), client: str = "client"):
        self.dir: str | None = None
        self.port: int | None = None
        self.broker_hosts = tuple(broker_hosts)
        self.broker_principals = [f"kafka/{h}@{REALM}" for h in self.broker_hosts]
        self.broker_principal = self.broker_principals[0]
        self.client_principal = f"{client}@{REALM}"
        self._proc: subprocess.Popen | None = None

    # -- files -----------------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        if self.dir is None:
            raise RuntimeError("KDC not started")
        return os.path.join(self.dir, name)

    @property
    def krb5_conf(self) -> str:
        return self._path("krb5.conf")

    @property
    def broker_keytab(self) -> str:
        return self._path("broker.keytab")

    @property
    def client_keytab(self) -> str:
        return self._path("client.keytab")

    @property
    def ccache(self) -> str:
        return self._path("ccache")

    @property
    def log_path(self) -> str:
        return self._path("kdc.log")

    def client_env(self) -> dict:
        """KRB5_CONFIG, KRB5_CLIENT_KTNAME and KRB5CCNAME for a gssapi client (MIT krb5 gets
        the initial ticket from the client keytab by itself)."""
        return {"KRB5_CONFIG": self.krb5_conf, "KRB5_CLIENT_KTNAME": self.client_keytab,
                "KRB5CCNAME": f"FILE:{self.ccache}"}

    def jvm_opts(self) -> list[str]:
        """JVM options pointing Java's Kerberos at this KDC."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}",
                "-Dsun.security.krb5.disableReferrals=true"]

    def jaas_login(self, principal: str | None = None) -> str:
        """A broker-side Krb5LoginModule JAAS entry (``sasl.jaas.config`` value)."""
        return ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                f'storeKey=true keyTab="{self.broker_keytab}" '
                f'principal="{principal or self.broker_principal}";')

    def _env(self) -> dict:
        return dict(os.environ, KRB5_CONFIG=self.krb5_conf,
                    KRB5_KDC_PROFILE=self._path("kdc.conf"))

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> "KerberosKDC":
        tools = {t: _tool(t) for t in _TOOLS}
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="pyprod-kdc-")
        for _ in range(50):
            self.port = free_ports(1)[0]
            if _udp_free(self.port):
                break
        fmt = dict(realm=REALM, dir=self.dir, port=self.port)
        with open(self._path("krb5.conf"), "w") as f:
            f.write(_KRB5_CONF.format(**fmt))
        with open(self._path("kdc.conf"), "w") as f:
            f.write(_KDC_CONF.format(**fmt))
        with open(self._path("kadm5.acl"), "w") as f:
            f.write(f"*/admin@{REALM} *\n")
        env = self._env()
        self._run([tools["kdb5_util"], "-r", REALM, "create", "-s", "-W", "-P",
                   os.urandom(12).hex()], env)
        queries = [f"addprinc -randkey {p}" for p in self.broker_principals]
        queries += [f"ktadd -k {self.broker_keytab} {' '.join(self.broker_principals)}",
                    f"addprinc -randkey {self.client_principal}",
                    f"ktadd -k {self.client_keytab} {self.client_principal}"]
        for q in queries:
            self._run([tools["kadmin.local"], "-r", REALM, "-q", q], env)
        live.add(self)
        self._proc = spawn([tools["krb5kdc"], "-n", "-r", REALM], env=env,
                           log_path=self._path("krb5kdc.out"))
        deadline = time.monotonic() + timeout
        while True:  # TCP accepts once the KDC has bound both sockets
            if self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"krb5kdc exited with {self._proc.returncode}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("krb5kdc never listened")
            time.sleep(0.05)

    def _run(self, argv, env) -> None:
        res = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError(f"{os.path.basename(argv[0])} failed ({res.returncode}): "
                               f"{(res.stdout + res.stderr)[-1500:]}")

    def kinit(self) -> None:
        """Get the client's ticket into ``ccache`` with ``kinit -k`` (for tools that need one)."""
        self._run(["kinit", "-k", "-t", self.client_keytab, self.client_principal],
                  dict(os.environ, **self.client_env()))

    def stop(self, timeout: float = 5.0) -> None:
        terminate(self._proc, timeout)
        self._proc = None
        live.discard(self)
        if self.dir and not os.environ.get("PYPROD_KEEP_KAFKA_LOGS"):
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except (OSError, RuntimeError):
            return ""

    def __enter__(self) -> "KerberosKDC":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<KerberosKDC {REALM} 127.0.0.1:{self.port}>"
