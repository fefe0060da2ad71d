# Sourced by run-demo.sh (`. scripts/setup.sh demo`) and run-tests.sh (`. scripts/setup.sh test`):
# installs what that command needs and is missing, saying so one line per step.
# 1. System packages via apt-get: a JDK and Maven (the local Kafka broker) for both; for `test`
#    also Kerberos (a KDC for the GSSAPI tests; libkrb5-dev, which pip needs to build gssapi).
# 2. .venv with pyprod built from source (kcore compiled) and its `demo` extra (the readers) or
#    its `test` extra (everything the suite uses; it includes `demo`). The build is skipped while
#    its inputs are unchanged (hashed into a stamp in .venv, with the extra installed): the kcore
#    sources, setup.py, pyproject.toml, the Python version, PYPROD_NO_EXTENSIONS. A venv with the
#    `test` extra serves the demo as it is; one made by the demo gets the `test` extra added.
#    pyprod is installed editable, so edits to Python files need no reinstall.
# PYPROD_SETUP_DRY_RUN=1: print what would be installed, install nothing.
_setup_say() { printf 'setup: %s\n' "$*"; }
_setup_mode=${1:-}
case "$_setup_mode" in
  demo|test) ;;
  *) _setup_say "usage: . scripts/setup.sh demo|test (got '${_setup_mode}')" >&2; return 2 ;;
esac
_setup_dry=${PYPROD_SETUP_DRY_RUN:-}
_setup_run() {  # a command, or in a dry run its echo
  if [ -n "$_setup_dry" ]; then _setup_say "would run: $*"; else "$@"; fi
}

_setup_apt=()   # what this mode needs and the machine lacks
command -v java >/dev/null || _setup_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || _setup_apt+=(maven)
_setup_what="JDK, Maven"
if [ "$_setup_mode" = test ]; then   # Kerberos: the GSSAPI tests and pip's build of gssapi
  _setup_what="JDK, Maven, Kerberos"
  PATH="$PATH:/usr/sbin:/sbin" command -v krb5kdc >/dev/null || _setup_apt+=(krb5-kdc)
  PATH="$PATH:/usr/sbin:/sbin" command -v kadmind >/dev/null || _setup_apt+=(krb5-admin-server)
  command -v kinit >/dev/null || _setup_apt+=(krb5-user)
  dpkg -s libkrb5-dev >/dev/null 2>&1 || command -v krb5-config >/dev/null \
    || _setup_apt+=(libkrb5-dev)
fi
if [ ${#_setup_apt[@]} -gt 0 ]; then
  if [ -z "$_setup_dry" ] && ! command -v apt-get >/dev/null; then
    _setup_say "missing ${_setup_apt[*]} and there is no apt-get: install them, then re-run" >&2
    return 1
  fi
  _setup_sudo=()
  [ "$(id -u)" = 0 ] || _setup_sudo=(sudo)
  _setup_say "installing ${_setup_apt[*]} with apt-get (once)"
  _setup_run "${_setup_sudo[@]}" apt-get update -qq
  _setup_run "${_setup_sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    "${_setup_apt[@]}"
else
  _setup_say "system packages present ($_setup_what)"
fi

if [ ! -x .venv/bin/python ]; then
  _setup_say "creating .venv"
  _setup_run python3 -m venv .venv
fi
[ -n "$_setup_dry" ] || . .venv/bin/activate
_setup_py=.venv/bin/python
[ -x "$_setup_py" ] || _setup_py=python3   # a dry run before .venv exists

# One hash per install step: the dependencies (pyproject.toml) and the kcore build.
_setup_hashes=$("$_setup_py" - <<'EOF'
import glob, hashlib, os, sys

def digest(paths, *extra):
    h = hashlib.sha256("|".join((sys.version, os.getcwd()) + extra).encode())
    for p in paths:
        with open(p, "rb") as f:
            h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()

build = ["setup.py", "pyproject.toml"] + sorted(
    p for pattern in ("*.pyx", "*.pxd", "*.h", "_*.py")
    for p in glob.glob(os.path.join("src", "kcore", pattern)))
print(digest(["pyproject.toml"]), digest(build, os.environ.get("PYPROD_NO_EXTENSIONS", "")))
EOF
)
_setup_deps=${_setup_hashes% *}
_setup_build=${_setup_hashes#* }
# The stamp: "<deps hash> <build hash> <extra>" of the last good install. No extra: the `test`
# extra, all that an older setup.sh installed.
_setup_stamp=.venv/.pyprod-setup-stamp
_setup_old_deps="" _setup_old_build="" _setup_old_extra=""
[ ! -f "$_setup_stamp" ] || read -r _setup_old_deps _setup_old_build _setup_old_extra \
  < "$_setup_stamp" || true
[ -n "$_setup_old_extra" ] || _setup_old_extra=test
if [ "${PYPROD_NO_EXTENSIONS:-}" != 1 ] && ! compgen -G "src/kcore/*.so" >/dev/null \
    && ! compgen -G "src/kcore/*.pyd" >/dev/null; then
  _setup_old_deps=""   # the compiled modules are gone (e.g. cleaned): build again
fi
_setup_requires() {  # extra $1's requirements, from the installed pyprod's metadata
  "$_setup_py" - "$1" 2>/dev/null <<'EOF'
import importlib.metadata, sys
from pip._vendor.packaging.requirements import Requirement
for line in importlib.metadata.requires("pyprod") or []:
    r = Requirement(line)
    if r.marker is not None and r.marker.evaluate({"extra": sys.argv[1]}) and r.name != "pyprod":
        r.marker = None
        print(r)
EOF
}
_setup_about() {  # what an extra brings
  case "$1" in
    demo) echo "the demo's readers, confluent-kafka and kafka-python with its codecs: about 20 MB" ;;
    test) echo "everything the suite uses: about 1 GB the first time, mostly pyspark and pyarrow" ;;
  esac
}

_setup_install=""   # the extra to install (with pyprod, built again)
_setup_extra=""     # the extra the stamp records after an install
if [ "$_setup_old_deps" != "$_setup_deps" ]; then
  _setup_say "installing build tools (pip, setuptools, Cython)"
  _setup_run python -m pip install -q --upgrade pip "setuptools>=77" "Cython>=3"
  _setup_say "installing pyprod from source with its $_setup_mode extra" \
             "($(_setup_about "$_setup_mode")) and compiling kcore (a few minutes)"
  _setup_install=$_setup_mode
elif [ "$_setup_old_extra" != test ] && [ "$_setup_old_extra" != "$_setup_mode" ]; then
  _setup_say ".venv has the $_setup_old_extra extra: adding the $_setup_mode extra" \
             "($(_setup_about "$_setup_mode"))"
  if _setup_reqs=$(_setup_requires "$_setup_mode") && [ -n "$_setup_reqs" ]; then
    mapfile -t _setup_reqs <<<"$_setup_reqs"   # kcore as built: no compiling again
    _setup_run python -m pip install "${_setup_reqs[@]}"
    _setup_extra=$_setup_mode
  else
    _setup_install=$_setup_mode   # no metadata to read: pyprod again, with the extra
  fi
elif [ "$_setup_old_build" != "$_setup_build" ]; then
  _setup_say "kcore sources or setup.py changed: compiling pyprod again (a minute or two)"
  _setup_run python -m pip install --no-build-isolation --no-deps -e .
  _setup_extra=$_setup_old_extra
else
  _setup_say ".venv up to date (no change to kcore, setup.py or pyproject.toml since the last" \
             "build; it has the $_setup_old_extra extra): nothing to install"
fi
if [ -n "$_setup_install" ]; then   # a failed compile stops here
  _setup_run python -m pip install --no-build-isolation -e ".[$_setup_install]"
  _setup_extra=$_setup_install
fi
if [ -z "$_setup_extra" ]; then
  :
elif [ -n "$_setup_dry" ]; then
  _setup_say "would write $_setup_stamp: $_setup_deps $_setup_build $_setup_extra"
else
  echo "$_setup_deps $_setup_build $_setup_extra" > "$_setup_stamp"
fi
unset _setup_mode _setup_dry _setup_apt _setup_what _setup_sudo _setup_py _setup_hashes \
  _setup_deps _setup_build _setup_stamp _setup_old_deps _setup_old_build _setup_old_extra \
  _setup_install _setup_extra _setup_reqs
unset -f _setup_run _setup_requires _setup_about
