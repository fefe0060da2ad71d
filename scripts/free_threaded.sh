#!/usr/bin/env bash
# kcore on free-threaded CPython 3.14 (issue 31, section 2): builds CPython 3.14 with
# `./configure --disable-gil` (no PGO) from the pristine upstream release tarball, makes a venv on
# it, compiles a private copy of src/kcore there (a temp dir, like scripts/sanitize.sh: the
# in-tree .so files for the GIL build are untouched), says whether importing kcore turns the GIL
# back on, then runs the kernel tests (and, when they pass, the producer unit tests) twice: with
# PYTHON_GIL=0 (the GIL forced off) and with the interpreter's default.
#   scripts/free_threaded.sh                  build (once), tests/kernels, then tests/producer
#   scripts/free_threaded.sh tests/kernels/test_gil_free_races.py -x
#   scripts/free_threaded.sh --tsan           the same CPython built --with-thread-sanitizer
#                                             (another dir), kcore with -fsanitize=thread; the
#                                             thread tests (test_threaded_send_stress.py,
#                                             test_gil_free_races.py; or the tests named) run
#                                             with PYTHON_GIL=0 only; TSan's reports with a kcore
#                                             frame are listed at the end (suppressed: only
#                                             CPython's own races, scripts/tsan_suppressions.txt)
#   scripts/free_threaded.sh --bench [ARGS]   the stress test, then bench/threads.py (ARGS are
#                                             its options) with PYTHON_GIL=0 and =1: writes
#                                             bench/results/threads_ft_gil0.* and _gil1.*
#   scripts/free_threaded.sh --build-only     build CPython and the venv, nothing else
#   scripts/free_threaded.sh --no-peers       skip the table of which test-extra packages install
#                                             (slow under --tsan; tests needing one then skip/fail)
#   scripts/free_threaded.sh --declare-ft     compile the private copy as if every module had
#                                             Cython's freethreading_compatible=True (the
#                                             CYTHON_FREETHREADING_COMPATIBLE macro; setup.py
#                                             is not changed): an experiment until issue 31's
#                                             locks are in (see docs/free_threading.md); nothing
#                                             to do once setup.py declares it itself
# Where: $PYPROD_FT_CACHE (default ~/.cache/pyprod): cpython-3.14t[-tsan] (the install),
# venv-3.14t[-tsan], src (the tarball), build (the build trees, kept for a rebuild), apt (a private
# apt state: the machine's apt sources are not changed). A CPython already built with the same
# tarball and flags is reused; delete its dir to rebuild.
#
# The source: Debian's archive carries CPython 3.14 (python3.14, in unstable and testing); its
# .orig.tar.xz is upstream's release tarball (the release tag's source, Python-3.14.x/), used
# as it is: none of Debian's patches. A private apt config (deb-src lines for those suites on the
# machine's own Debian mirror) fetches the newest version the signed index lists with
# `apt-get source --download-only`, which checks the files against the index. When the mirror's
# pool lacks every version the index lists (a mirror that lags behind its index), the pinned
# release below is fetched from the pool instead and checked twice: against the sha256 in its
# .dsc, whose maintainer signature gpgv checks with debian-keyring, and against the pinned sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
say() { printf 'free-threaded: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

tsan=0 build_only=0 declare_ft=0 no_peers=0 bench=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tsan) tsan=1 ;;
    --bench) bench=1 ;;
    --build-only) build_only=1 ;;
    --declare-ft) declare_ft=1 ;;
    --no-peers) no_peers=1 ;;
    --) shift; break ;;
    *) break ;;
  esac
  shift
done
[ "$tsan" = 1 ] && [ "$bench" = 1 ] && die "--bench measures: not under --tsan"
stress=tests/kernels/test_threaded_send_stress.py
thread_tests=("$stress" tests/kernels/test_gil_free_races.py)

PIN_VERSION=3.14.7   # the fallback release; its sha256 as in the maintainer-signed python3.14_3.14.7-1.dsc
PIN_SHA256=3b48dac8fb59f62eaa67ac83c1eb12bda1b7a08406dd286e252c11a66be27f81
PIN_DSC=python3.14_3.14.7-1.dsc

cache=${PYPROD_FT_CACHE:-$HOME/.cache/pyprod}
name=cpython-3.14t; [ "$tsan" = 1 ] && name=cpython-3.14t-tsan
prefix=$cache/$name
venv=$cache/venv-3.14t; [ "$tsan" = 1 ] && venv=$cache/venv-3.14t-tsan
configure_flags=(--disable-gil --prefix="$prefix" --with-ensurepip=install)
[ "$tsan" = 1 ] && configure_flags+=(--with-thread-sanitizer)
jobs=${PYPROD_FT_JOBS:-2}
mkdir -p "$cache/src" "$cache/build"

# An older TSan runtime cannot map its shadow memory under the large mmap randomisation of some
# kernels ("unexpected memory mapping"): a probe says whether TSan-built programs need ASLR off
# (setarch -R); if so, everything that runs the TSan-built python runs under it.
run=()
if [ "$tsan" = 1 ]; then
  probe=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-tsan-probe.XXXXXX")
  printf 'int main(void) { return 0; }\n' > "$probe/p.c"
  gcc -fsanitize=thread "$probe/p.c" -o "$probe/p" || die "gcc cannot build with -fsanitize=thread (libtsan)"
  if ! "$probe/p" >/dev/null 2>&1; then
    setarch "$(uname -m)" -R "$probe/p" >/dev/null 2>&1 || die "TSan-built programs do not run here"
    run=(setarch "$(uname -m)" -R)
    say "TSan needs ASLR off on this kernel: running under setarch -R"
  fi
  rm -rf "$probe"
  # Building, pip and the compile run the instrumented interpreter quietly (a race reported in
  # CPython or pip there must not fail the step: TSan's exit code is 66 after any report); the
  # tests set their own options (scripts/tsan_suppressions.txt, reports logged and listed).
  export TSAN_OPTIONS="report_bugs=0 exitcode=0"
fi

# --- build dependencies (the machine's own suite) ---------------------------------------------
apt_install() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and there is no apt-get"
  local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  say "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# --- the source ----------------------------------------------------------------------------------
debian_mirror() {   # the machine's Debian mirror, from its apt sources (deb822 or one-line)
  [ -n "${PYPROD_FT_DEBIAN_MIRROR:-}" ] && { echo "${PYPROD_FT_DEBIAN_MIRROR%/}"; return; }
  local f u
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    u=$(grep -hoE '^[[:space:]]*(URIs:|deb(-src)?)[[:space:]]+(\[[^]]*\][[:space:]]+)?[a-z+]+://[^[:space:]]+' "$f" \
        | grep -oE '[a-z+]+://[^[:space:]]+' | grep -E '/debian/?$' | head -1 || true)
    [ -n "$u" ] && { echo "${u%/}"; return; }
  done
  die "no Debian mirror in /etc/apt (set PYPROD_FT_DEBIAN_MIRROR)"
}

fetch_source() {   # prints the path of a verified python3.14_*.orig.tar.xz
  local ok
  ok=$(ls -1 "$cache/src"/python3.14_*.orig.tar.xz.verified 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$ok" ]; then echo "${ok%.verified}"; return; fi
  apt_install apt dpkg-dev debian-keyring xz-utils curl >&2
  local mirror apt_dir
  mirror=$(debian_mirror)
  apt_dir=$cache/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
  {
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror forky main"
  } > "$apt_dir/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=$apt_dir/sources.list.d"
              -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
              -o "APT::Sandbox::User=root")
  say "reading Debian's source index for python3.14 (private apt state in $apt_dir)" >&2
  apt-get -qq "${opts[@]}" update >&2 || say "apt-get update failed: trying the pinned release" >&2
  local v versions
  versions=$(apt-cache "${opts[@]}" showsrc python3.14 2>/dev/null | awk '/^Version:/ {print $2}' | sort -Vru || true)
  for v in $versions; do
    local up=${v%-*}; up=${up#*:}
    if (cd "$cache/src" && apt-get -qq "${opts[@]}" source --download-only "python3.14=$v" >/dev/null 2>&1); then
      touch "$cache/src/python3.14_$up.orig.tar.xz.verified"   # apt checked it against the signed index
      say "python3.14 $v from Debian's archive (apt-get source, checked against the signed index)" >&2
      echo "$cache/src/python3.14_$up.orig.tar.xz"; return
    fi
    say "python3.14 $v is in the index but not in the mirror's pool" >&2
  done
  say "falling back to the pinned release $PIN_VERSION" >&2
  local pool=$mirror/pool/main/p/python3.14 tar=$cache/src/python3.14_$PIN_VERSION.orig.tar.xz
  curl -fsS -o "$cache/src/$PIN_DSC" "$pool/$PIN_DSC" || die "cannot fetch $PIN_DSC from Debian's archive"
  gpgv --keyring /usr/share/keyrings/debian-keyring.gpg "$cache/src/$PIN_DSC" 2>/dev/null \
    || die "$PIN_DSC: no good maintainer signature (debian-keyring)"
  local want
  want=$(awk '/^Checksums-Sha256:/ {on=1; next} /^[^ ]/ {on=0} on && $3 ~ /orig\.tar\.xz$/ {print $1}' "$cache/src/$PIN_DSC")
  [ "$want" = "$PIN_SHA256" ] || die "$PIN_DSC names sha256 $want, not the pinned $PIN_SHA256"
  [ -s "$tar" ] || curl -fsS -o "$tar" "$pool/python3.14_$PIN_VERSION.orig.tar.xz" || die "cannot fetch the tarball"
  echo "$PIN_SHA256  $tar" | sha256sum -c --quiet - >&2 || { rm -f "$tar"; die "sha256 mismatch: $tar"; }
  touch "$tar.verified"
  echo "$tar"
}

# --- CPython -----------------------------------------------------------------------------------
python=$prefix/bin/python3.14t
stamp=$prefix/.pyprod-build   # "<tarball> <configure flags>" of the install, then timings
build_python() {
  local tar want
  tar=$(fetch_source)
  want="$(basename "$tar") ${configure_flags[*]}"
  if [ -x "$python" ] && [ "$(head -1 "$stamp" 2>/dev/null)" = "$want" ]; then
    say "$name already built ($(basename "$tar")): $python"
    return
  fi
  apt_install build-essential pkg-config libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev \
    libsqlite3-dev libreadline-dev libncurses-dev libgdbm-dev uuid-dev libzstd-dev libexpat1-dev
  local tree=$cache/build/$name t0 t1 t2
  rm -rf "$tree" "$prefix"; mkdir -p "$tree"
  tar xJf "$tar" -C "$tree" --strip-components=1
  say "building $name from $(basename "$tar"): ./configure ${configure_flags[*]}; make -j$jobs (nice; logs in $tree)"
  t0=$(date +%s)
  (cd "$tree" && nice -n 10 ./configure "${configure_flags[@]}" > configure.log 2>&1) \
    || { tail -30 "$tree/configure.log" >&2; die "configure failed ($tree/configure.log)"; }
  t1=$(date +%s)
  # Under TSan the install's byte-compilation of the whole library (3 optimisation levels) ran
  # 20+ minutes on 2 cores: there, only the library's top level is compiled (-l); the rest is
  # compiled on first import.
  local install_opts=(); [ "$tsan" = 1 ] && install_opts=(COMPILEALL_OPTS="-j0 -l")
  (cd "$tree" && nice -n 10 "${run[@]}" make -j"$jobs" > make.log 2>&1 \
     && nice -n 10 "${run[@]}" make install "${install_opts[@]}" > install.log 2>&1) \
    || { tail -30 "$tree/make.log" "$tree/install.log" >&2 2>/dev/null; die "make failed (logs in $tree)"; }
  t2=$(date +%s)
  { echo "$want"; echo "configure $((t1 - t0))s, make+install $((t2 - t1))s, jobs=$jobs, $(nproc) cores"; } > "$stamp"
  say "built $name in $((t2 - t0))s (configure $((t1 - t0))s, make+install $((t2 - t1))s)"
}
build_python
"${run[@]}" "$python" -c 'import sys, sysconfig; assert sysconfig.get_config_var("Py_GIL_DISABLED"); assert not sys._is_gil_enabled()' \
  || die "$python is not a free-threaded build"

# --- the venv ------------------------------------------------------------------------------------
# The kernel tests' needs first (a failure stops here), then every other package of
# pyproject.toml's test extras one by one, binary wheels only (a cp314t wheel or nothing: no long
# source builds): the table says which install. pyspark is published as a source package only:
# that is allowed for it alone.
core=("Cython>=3.1" "setuptools>=77" "pytest>=8" "pytest-benchmark>=4" "hypothesis>=6.100" "crc32c>=2.3"
      "cramjam>=2.8" "kafka-python>=2.0.2" "lz4")
mapfile -t peers < <("${run[@]}" "$python" - <<'EOF'
import re, tomllib
core = {"cython", "setuptools", "pytest", "pytest-benchmark", "hypothesis", "crc32c", "cramjam",
        "kafka-python", "lz4"}
with open("pyproject.toml", "rb") as f:
    test = tomllib.load(f)["project"]["optional-dependencies"]["test"]
for req in test:
    name = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]
    if name.lower() not in core:
        print(name)
EOF
)
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  "${run[@]}" "$python" -m venv "$venv"
fi
vpy=$venv/bin/python
if [ ! -e "$venv/.pyprod-core" ]; then
  say "installing ${core[*]}"
  "${run[@]}" "$vpy" -m pip install -q --upgrade pip
  "${run[@]}" "$vpy" -m pip install -q "${core[@]}"
  : > "$venv/.pyprod-core"
fi
if [ "$no_peers" = 1 ]; then
  say "--no-peers: the test extras' other packages are not tried (the last table, if any, follows)"
elif [ "$(head -1 "$venv/.pyprod-peers" 2>/dev/null)" != "# ${peers[*]}" ]; then
  # The newest release of each, pinned, whatever the extras' bounds (the question is only
  # whether a cp314t wheel exists): unpinned, pip would backtrack to an old release that happens
  # to have a pure-Python wheel and report that as a success.
  say "trying the peers' newest releases (binary wheels only): ${peers[*]}"
  for p in "${peers[@]}"; do
    extra=(--only-binary :all:); [ "$p" = pyspark ] && extra+=(--no-binary pyspark)
    latest=$("${run[@]}" "$vpy" -m pip index versions "$p" 2>/dev/null | sed -n '1s/.*(\(.*\)).*/\1/p')
    spec=$p; [ -n "$latest" ] && spec="$p==$latest"
    if "${run[@]}" "$vpy" -m pip install -q "${extra[@]}" "$spec" >"$venv/.pip-$p.log" 2>&1; then
      printf '%-18s %-8s installs\n' "$p" "$latest"
    else
      printf '%-18s %-8s does not install: %s\n' "$p" "$latest" \
        "$(grep -m1 -oE 'requirement [^ ]+|No matching distribution found for [^ ]+' "$venv/.pip-$p.log" \
           | sed 's/^requirement /no cp314t wheel: /;s/^No matching distribution found for /no cp314t wheel: /')"
    fi
  done > "$venv/.pyprod-peers.body"
  { echo "# ${peers[*]}"; cat "$venv/.pyprod-peers.body"; } > "$venv/.pyprod-peers.tmp"
  rm -f "$venv/.pyprod-peers.body"
  mv "$venv/.pyprod-peers.tmp" "$venv/.pyprod-peers"
fi
[ -e "$venv/.pyprod-peers" ] && tail -n +2 "$venv/.pyprod-peers" | sed 's/^/free-threaded:   /'
"${run[@]}" "$vpy" -c 'import Cython, sys; print("free-threaded: venv", sys.version.split()[0], "Cython", Cython.__version__)'
[ "$build_only" = 1 ] && exit 0

# --- kcore, a private copy -------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-ft.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp setup.py pyproject.toml "$work/"
: > "$work/README.md"   # pyproject.toml names it
cp -r src/kcore "$work/src/"
rm -rf "$work/src/kcore/__pycache__" "$work/src/kcore"/*/__pycache__ "$work/src/kcore"/*.so
for pyx in "$work"/src/kcore/*.pyx; do rm -f "${pyx%.pyx}.c"; done   # generated, not *_impl.c
cflags="-g"; ldflags=""
[ "$tsan" = 1 ] && { cflags="-fsanitize=thread -g -O1"; ldflags="-fsanitize=thread"; }
if [ "$declare_ft" = 1 ] && grep -q freethreading_compatible setup.py; then
  say "--declare-ft: setup.py declares freethreading_compatible itself: nothing to add"
elif [ "$declare_ft" = 1 ]; then
  # What the directive does, without touching setup.py: Cython's generated C reads this macro
  # when the directive is absent, and then sets the modules' Py_mod_gil slot to NOT_USED.
  cflags="$cflags -DCYTHON_FREETHREADING_COMPATIBLE=1"
  say "--declare-ft: every module declares Py_MOD_GIL_NOT_USED (an experiment: kcore is not safe yet)"
fi
t0=$(date +%s)
plain=$cache/venv-3.14t/bin/python
if [ "$tsan" = 1 ] && "$plain" -c 'import Cython' 2>/dev/null; then
  # Cythonizing under the instrumented interpreter took over 7 minutes; the generated C does not
  # depend on the interpreter, so the plain 3.14t venv writes it (setup.py cythonizes when it is
  # loaded; the TSan build below then finds the .c files current and only compiles them).
  say "cythonizing with $plain (the TSan build compiles the C)"
  (cd "$work" && nice -n 10 "$plain" setup.py -q --name >cythonize.log 2>&1) \
    || { tail -20 "$work/cythonize.log" >&2; die "cythonize failed"; }
fi
say "compiling kcore in $work (CFLAGS=$cflags)"
if ! (cd "$work" && CFLAGS="$cflags" LDFLAGS="$ldflags" nice -n 10 "${run[@]}" "$vpy" setup.py -q build_ext --inplace -j "$jobs" >build.log 2>&1); then
  tail -40 "$work/build.log" >&2
  die "kcore build failed"
fi
say "kcore compiled in $(( $(date +%s) - t0 ))s"

# --- does importing kcore turn the GIL back on? ---------------------------------------------------
# A module without Py_mod_gil = Py_MOD_GIL_NOT_USED (Cython: freethreading_compatible=True) makes
# the interpreter enable the GIL when it is imported, with a RuntimeWarning, unless PYTHON_GIL=0.
# Each module alone first (a fresh interpreter each, kcore's package __init__ bypassed, so the
# module's own slot decides), then the package as users import it.
abi=$(ls "$work"/src/kcore/*.so | head -1); say "extension files: $(basename "$abi" | cut -d. -f2-)"
one_check='
import importlib, os, sys, types, warnings
d, name = sys.argv[1], sys.argv[2]
pkg = types.ModuleType("kcore"); pkg.__path__ = [d]; sys.modules["kcore"] = pkg
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    importlib.import_module("kcore." + name)
flips = [str(m.message).split("module ")[1].split(",")[0].strip("\x27") for m in w if "GIL" in str(m.message)]
print(name if flips == ["kcore." + name] else "")
'
needs=()
for so in "$work"/src/kcore/*.so; do
  m=$(basename "$so"); m=${m%%.*}
  r=$(env -u PYTHON_GIL PYTHONPATH="$work/src" "${run[@]}" "$vpy" -c "$one_check" "$work/src/kcore" "$m" 2>/dev/null || echo "?$m")
  [ -n "$r" ] && needs+=("$r")
done
say "kcore modules that turn the GIL back on when imported: ${#needs[@]} of $(ls "$work"/src/kcore/*.so | wc -l)${needs[*]:+ (${needs[*]})}"
gil_check='
import sys, warnings
before = sys._is_gil_enabled()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import kcore
print("GIL enabled before import:", before, "| after import kcore:", sys._is_gil_enabled())
for m in w:
    if "GIL" in str(m.message):
        print("  RuntimeWarning:", str(m.message).split(". To")[0])
        break
'
env -u PYTHON_GIL PYTHONPATH="$work/src" "${run[@]}" "$vpy" -c "$gil_check" | sed 's/^/free-threaded: PYTHON_GIL unset: /'
PYTHON_GIL=0 PYTHONPATH="$work/src" "${run[@]}" "$vpy" -c "$gil_check" | sed 's/^/free-threaded: PYTHON_GIL=0:    /'

# --- the tests ---------------------------------------------------------------------------------------
run_pytest() {   # run_pytest <label> <PYTHON_GIL value or "default"> <pytest args...>
  local label=$1 gil=$2; shift 2
  local envs=(-u PYPROD_NO_EXTENSIONS PYTHONPATH="$work/src:$repo/src:$repo")
  if [ "$gil" = default ]; then envs=(-u PYTHON_GIL "${envs[@]}"); else envs+=(PYTHON_GIL="$gil"); fi
  if [ "$tsan" = 1 ]; then
    # Suppressed: CPython's own races only (race_top: the racing access is in CPython's code).
    # exitcode=0: a test's verdict is its own (the thread tests' forked children would exit 66
    # on any report); the reports are listed at the end and fail the run if one has a kcore frame.
    envs+=(TSAN_OPTIONS="suppressions=$repo/scripts/tsan_suppressions.txt halt_on_error=0 exitcode=0 second_deadlock_stack=1 log_path=$work/tsan"
           PYPROD_STRESS_RECORDS="${PYPROD_STRESS_RECORDS:-3000}")   # instrumented: 5-15x slower
  fi
  say "$label: python -m pytest $* (PYTHON_GIL=$gil)"
  env "${envs[@]}" "${run[@]}" "$vpy" -m pytest -q -p no:cacheprovider \
    -o "pythonpath=$work/src $repo/src $repo" "$@"
}
gils=(0 default); [ "$tsan" = 1 ] && gils=(0)
status=0
if [ "$bench" = 1 ]; then
  # The stress test is expected to fail while kcore's locks are not in: the bench runs anyway.
  for g in "${gils[@]}"; do run_pytest stress "$g" "$stress" || status=1; done
  "$vpy" -c 'import confluent_kafka' 2>/dev/null \
    || die "bench/threads.py needs confluent-kafka (the mock cluster) in $venv: run without --no-peers"
  for g in 0 1; do
    say "bench: bench/threads.py --name threads_ft_gil$g $* (PYTHON_GIL=$g)"
    env -u PYPROD_NO_EXTENSIONS PYTHONPATH="$work/src:$repo/src:$repo" PYTHON_GIL=$g \
      "$vpy" bench/threads.py --name "threads_ft_gil$g" "$@" || status=1
  done
elif [ $# -gt 0 ]; then
  for g in "${gils[@]}"; do run_pytest tests "$g" "$@" || status=1; done
elif [ "$tsan" = 1 ]; then
  run_pytest threads 0 "${thread_tests[@]}" || status=1
else
  for g in "${gils[@]}"; do  # both, whatever the first says (a codec without a 3.14t wheel)
    run_pytest kernels "$g" tests/kernels || status=1
    run_pytest producer "$g" tests/producer || status=1
  done
fi
if [ "$tsan" = 1 ]; then
  reports=$(cat "$work"/tsan.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
  kreports=$(cat "$work"/tsan.* 2>/dev/null | awk '/^WARNING: ThreadSanitizer/ {r=$0; k=0} /kcore/ {k=1} /^SUMMARY: ThreadSanitizer/ && k {print}' | sort | uniq -c | sort -rn || true)
  say "ThreadSanitizer: $reports reports; those with a kcore frame:"
  if [ -n "$kreports" ]; then
    status=1
    echo "$kreports" | head -60
    places=$(echo "$kreports" | wc -l)
    if [ "$places" -gt 60 ]; then say "... $places places in all"; fi
  else
    echo "  none"
  fi
  if ls "$work"/tsan.* >/dev/null 2>&1; then
    rm -rf "$cache/tsan-reports"; mkdir -p "$cache/tsan-reports"; cp "$work"/tsan.* "$cache/tsan-reports/"
    say "this run's reports kept in $cache/tsan-reports"
  fi
fi
exit $status
