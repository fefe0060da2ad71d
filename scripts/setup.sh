# Sourced by run-tests.sh and run-demo.sh: installs what is missing, saying so one line per step.
# 1. System packages via apt-get: a JDK and Maven (the local Kafka broker), Kerberos (a KDC for
#    the GSSAPI tests; libkrb5-dev, which pip needs to build gssapi).
# 2. .venv with pyprod built from source (kcore compiled) and its test extras. The build is
#    skipped while its inputs are unchanged (hashed into a stamp in .venv): the kcore sources,
#    setup.py, pyproject.toml, the Python version, PYPROD_NO_EXTENSIONS. pyprod is installed
#    editable, so edits to Python files need no reinstall.
_setup_say() { printf 'setup: %s\n' "$*"; }

_setup_apt=()
command -v java >/dev/null || _setup_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || _setup_apt+=(maven)
PATH="$PATH:/usr/sbin:/sbin" command -v krb5kdc >/dev/null || _setup_apt+=(krb5-kdc)
PATH="$PATH:/usr/sbin:/sbin" command -v kadmind >/dev/null || _setup_apt+=(krb5-admin-server)
command -v kinit >/dev/null || _setup_apt+=(krb5-user)
dpkg -s libkrb5-dev >/dev/null 2>&1 || command -v krb5-config >/dev/null || _setup_apt+=(libkrb5-dev)
if [ ${#_setup_apt[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    _setup_say "missing ${_setup_apt[*]} and there is no apt-get: install them, then re-run" >&2
    return 1
  fi
  _setup_sudo=()
  [ "$(id -u)" = 0 ] || _setup_sudo=(sudo)
  _setup_say "installing ${_setup_apt[*]} with apt-get (once)"
  "${_setup_sudo[@]}" apt-get update -qq
  "${_setup_sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${_setup_apt[@]}"
else
  _setup_say "system packages present (JDK, Maven, Kerberos)"
fi

if [ ! -x .venv/bin/python ]; then
  _setup_say "creating .venv"
  python3 -m venv .venv
fi
. .venv/bin/activate

# One hash per install step: the dependencies (pyproject.toml) and the kcore build.
_setup_hashes=$(python - <<'EOF'
import glob, hashlib, os, sys

def digest(paths, *extra):
    h = hashlib.sha256("|".join((sys.version, os.getcwd()) + extra).encode())
    for p in paths:
        with open(p, "rb") as f:
            h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()

build = ["setup.py", "pyproject.toml"] + sorted(
    p for pattern in ("*.pyx", "*.pxd", "*.h", "shared/*.py")
    for p in glob.glob(os.path.join("src", "kcore", pattern)))
print(digest(["pyproject.toml"]), digest(build, os.environ.get("PYPROD_NO_EXTENSIONS", "")))
EOF
)
_setup_deps=${_setup_hashes% *}
_setup_build=${_setup_hashes#* }
_setup_stamp=.venv/.pyprod-setup-stamp   # "<deps hash> <build hash>" of the last good install
_setup_old=$(cat "$_setup_stamp" 2>/dev/null || true)
if [ "${PYPROD_NO_EXTENSIONS:-}" != 1 ] && ! compgen -G "src/kcore/*.so" >/dev/null \
    && ! compgen -G "src/kcore/*.pyd" >/dev/null; then
  _setup_old=""   # the compiled modules are gone (e.g. cleaned): build again
fi

if [ "${_setup_old% *}" != "$_setup_deps" ]; then
  _setup_say "installing build tools (pip, setuptools, Cython)"
  python -m pip install -q --upgrade pip "setuptools>=77" "Cython>=3"
  _setup_say "installing pyprod from source with its test extras (the first time about 1 GB," \
             "mostly pyspark and pyarrow) and compiling kcore (a few minutes)"
  python -m pip install --no-build-isolation -e ".[test]"   # a failed compile stops here
  echo "$_setup_deps $_setup_build" > "$_setup_stamp"
elif [ "${_setup_old#* }" != "$_setup_build" ]; then
  _setup_say "kcore sources or setup.py changed: compiling pyprod again (a minute or two)"
  python -m pip install --no-build-isolation --no-deps -e .
  echo "$_setup_deps $_setup_build" > "$_setup_stamp"
else
  _setup_say ".venv up to date (no change to kcore, setup.py or pyproject.toml since the last" \
             "build): nothing to install"
fi
unset _setup_apt _setup_sudo _setup_hashes _setup_deps _setup_build _setup_stamp _setup_old
