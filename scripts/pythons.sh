#!/usr/bin/env bash
# The interpreter matrix (issue 41): kcore and the kernel, producer, network and integration tests
# (against the real Kafka broker the suite's fixtures start) on every CPython pyprod claims, one
# after another: 3.10 3.11 3.12 3.13 3.14 3.13t 3.14t. CI runs the whole suite on the machine's
# Python; this is the matrix.
#   scripts/pythons.sh                   every interpreter (built or unpacked once), then the tests
#   scripts/pythons.sh 3.10 3.13t        those only
#   scripts/pythons.sh --build-only      the interpreters, their venvs and kcore copies, no tests
#   scripts/pythons.sh 3.12 -- ARGS      pytest ARGS instead of the four test dirs (not recorded)
# Where the interpreters come from:
#   3.11          the machine's python3.11
#   3.13 3.14     built here from upstream's release tarball, fetched from Debian's archive
#   3.13t 3.14t   the same, ./configure --disable-gil (3.13t: cramjam 2.11.0 built from source and
#                 PYTHON_GIL=0, scripts/lib/cramjam_313t.sh says why) (3.14t is scripts/free_threaded.sh's build:
#                 same dirs, same stamp, built once for both)
#   3.10 3.12     upstream's release as the JavaCPP presets project builds it (Maven Central,
#                 org.bytedeco:cpython, linux-x86_64 jar: a full install), unpacked here: no
#                 registry reachable from here carries the 3.10 or 3.12 release sources (Debian's
#                 archive has only 3.13 and 3.14)
# Per interpreter, in $PYPROD_FT_CACHE (default ~/.cache/pyprod): cpython-V (the install), venv-V
# (the test extra minus what has no wheel for V: venv-V/.pyprod-peers says what installed; pyspark
# is left out, the Spark tests are not in the matrix), kcore-V (a private copy of src/kcore
# compiled for V, rebuilt when the sources change: the in-tree .so files are untouched),
# pythons/V.log (pytest's output). Results: docs/results/pythons.md (passed/failed/skipped per
# interpreter, with the commit), rewritten after each interpreter's run.
SAY_AS=pythons
. "$(dirname "$0")/lib/cpython.sh"

all=(3.10 3.11 3.12 3.13 3.14 3.13t 3.14t)
build_only=0 versions=() pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1 ;;
    --) shift; pytest_args=("$@"); break ;;
    3.*) [[ " ${all[*]} " == *" $1 "* ]] || die "unknown interpreter $1 (one of ${all[*]})"; versions+=("$1") ;;
    *) die "usage: scripts/pythons.sh [--build-only] [VERSION...] [-- PYTEST_ARGS]" ;;
  esac
  shift
done
[ ${#versions[@]} -eq 0 ] && versions=("${all[@]}")
cache=${PYPROD_FT_CACHE:-$HOME/.cache/pyprod}
jobs=${PYPROD_FT_JOBS:-2}
run=() cpython_install_opts=()
results=$cache/pythons
mkdir -p "$cache/src" "$cache/build" "$results"
test_dirs=(tests/kernels tests/producer tests/network tests/integration)

# --- the interpreters -----------------------------------------------------------------------------
declare -A MAVEN_CPYTHON=([3.10]=3.10.8-1.5.8 [3.12]=3.12.1-1.5.10)
m2=${PYPROD_M2_REPO:-$HOME/.m2/repository}

unpack_maven_python() {   # unpack_maven_python V PREFIX: org.bytedeco:cpython's install of V
  local v=$1 prefix=$2 mv=${MAVEN_CPYTHON[$1]} jar want tmp
  jar=$m2/org/bytedeco/cpython/$mv/cpython-$mv-linux-x86_64.jar
  if [ ! -s "$jar" ]; then
    say "fetching org.bytedeco:cpython:$mv (linux-x86_64) with Maven"
    mvn -q dependency:get -Dtransitive=false "-Dartifact=org.bytedeco:cpython:$mv:jar:linux-x86_64" >&2 \
      || die "Maven cannot fetch org.bytedeco:cpython:$mv"
  fi
  want="$(basename "$jar") $(sha256sum "$jar" | cut -d' ' -f1)"
  if [ -x "$prefix/bin/python$v" ] && [ "$(head -1 "$prefix/.pyprod-build" 2>/dev/null)" = "$want" ]; then
    return
  fi
  say "unpacking $(basename "$jar") into $prefix"
  tmp=$(mktemp -d "$cache/unpack.XXXXXX")
  unzip -q "$jar" 'org/bytedeco/cpython/linux-x86_64/*' -d "$tmp"
  rm -rf "$prefix"; mv "$tmp/org/bytedeco/cpython/linux-x86_64" "$prefix"; rm -rf "$tmp"
  chmod +x "$prefix"/bin/*   # a jar keeps no file modes
  # The build's rpath is $ORIGIN/:$ORIGIN/../:$ORIGIN/../lib/ everywhere: python finds
  # libpython in the install's top dir, but lib-dynload's _ctypes does not find libffi.so.7 there.
  local so
  for so in "$prefix"/libffi.so.*; do
    [ -e "$so" ] && ln -sf "../../../$(basename "$so")" "$prefix/lib/python$v/lib-dynload/"
  done
  echo "$want" > "$prefix/.pyprod-build"
}

py=""
interpreter() {   # interpreter V: sets py to V's python (built or unpacked when needed)
  local v=$1 prefix=$cache/cpython-$1
  case "$v" in
    3.11) py=$(PATH=${PATH//${VIRTUAL_ENV:-\/nonexistent}\/bin:/} command -v python3.11) \
            || die "no python3.11 on the machine"
          "$py" -c 'import sys; assert sys.prefix == sys.base_prefix' || die "$py is a venv's" ;;
    3.10|3.12) unpack_maven_python "$v" "$prefix"; py=$prefix/bin/python$v ;;
    3.13|3.14) build_cpython "cpython-$v" "python$v" --prefix="$prefix" --with-ensurepip=install
               py=$prefix/bin/python$v ;;
    3.13t|3.14t) build_cpython "cpython-$v" "python${v%t}" --disable-gil --prefix="$prefix" --with-ensurepip=install
                 py=$prefix/bin/python$v ;;
  esac
  # what the suite and pip need of the standard library; the optional modules missing are listed
  "$py" -c 'import ssl, ctypes, bz2, zlib, hashlib, venv, ensurepip' \
    || die "$py lacks a standard module the tests need"
  "$py" - > "$results/$v.missing" <<'EOF'
import importlib
out = []
for m in ("sqlite3", "lzma", "readline", "curses", "dbm.gnu", "tkinter"):
    try:
        importlib.import_module(m)
    except ImportError:
        out.append(m)
print(", ".join(out) or "none")
EOF
}

# --- kcore, a private copy per interpreter, rebuilt when the sources change ----------------------
kcore_for() {   # kcore_for V VPY: kcore-V current for the checkout's sources
  local v=$1 vpy=$2 dir=$cache/kcore-$1 new sum lockfd
  exec {lockfd}>"$cache/kcore-$v.lock"; flock "$lockfd"   # one compile at a time per interpreter
  new=$(mktemp -d "$cache/kcore-$v.new.XXXXXX")
  copy_kcore "$new"
  sum=$(cd "$new" && find . -type f ! -name build.log | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  if [ "$(cat "$dir/.pyprod-sources" 2>/dev/null)" = "$sum" ] && ls "$dir"/src/kcore/*.so >/dev/null 2>&1; then
    rm -rf "$new"; say "kcore-$v is current ($sum)"; exec {lockfd}>&-; return
  fi
  build_kcore "$vpy" "$new" "-g" ""
  echo "$sum" > "$new/.pyprod-sources"
  rm -rf "$dir"; mv "$new" "$dir"
  exec {lockfd}>&-
}

# --- the results file -------------------------------------------------------------------------------
write_results() {   # docs/results/pythons.md from $results/*.row (one per interpreter's last run)
  local out=docs/results/pythons.md v
  mkdir -p docs/results
  {
    echo "# The interpreter matrix (scripts/pythons.sh)"
    echo
    echo "Written by \`scripts/pythons.sh\`: \`pytest ${test_dirs[*]}\` against the real Kafka"
    echo "broker the fixtures start, kcore compiled for each interpreter. \"Commit\" is the checkout"
    echo "the run tested (\"+local\": with uncommitted changes under src/, tests/, setup.py)."
    echo
    echo "| Interpreter | Version | From | Passed | Failed | Skipped | Errors | Time | Commit |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for v in "${all[@]}"; do [ -e "$results/$v.row" ] && cat "$results/$v.row"; done
    echo
    echo "Test-extra packages left out (no wheel for the interpreter; pyspark is never installed"
    echo "here, the Spark tests are not part of the matrix), and the optional standard modules the"
    echo "interpreter lacks (none of them is used by pyprod or these tests):"
    echo
    for v in "${all[@]}"; do
      [ -e "$results/$v.row" ] || continue
      local out_pkgs
      out_pkgs=$(grep 'does not install' "$cache/venv-$v/.pyprod-peers" 2>/dev/null | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//;s/ /, /g' || true)
      echo "- $v: ${out_pkgs:-none} (standard modules missing: $(cat "$results/$v.missing" 2>/dev/null))"
    done
    echo
    echo "Skips and failures of each run (pytest -rfEs):"
    for v in "${all[@]}"; do
      [ -e "$results/$v.row" ] || continue
      echo
      echo "$v:"
      echo
      echo '```text'
      grep -E '^(FAILED|ERROR) tests/|^SKIPPED \[' "$results/$v.log" | cut -c1-160 | sort | uniq -c | sort -rn | head -30 || true
      echo '```'
    done
  } > "$out"
  say "wrote $out"
}

source_of() {
  case "$1" in
    3.11) echo "the machine's" ;;
    3.10|3.12) echo "org.bytedeco:cpython ${MAVEN_CPYTHON[$1]}" ;;
    *) sed -n '1s/ .*//p' "$cache/cpython-$1/.pyprod-build" | sed 's/\.orig\.tar\.xz$//;s/^python3\.1[0-9]_/release tarball /' ;;
  esac
}

cert_python() {   # a matrix venv whose Python has cryptography (tests/harness/certificates.py)
  local c
  for c in "$cache"/venv-3.1[0-4]/bin/python; do
    [ -x "$c" ] && "$c" -c 'import cryptography' 2>/dev/null && { echo "$c"; return; }
  done
  die "3.13t's TLS tests need another interpreter with cryptography: run scripts/pythons.sh 3.14 first"
}

# --- one interpreter after another -------------------------------------------------------------------
status=0
for v in "${versions[@]}"; do
  say "=== $v"
  interpreter "$v"
  venv=$cache/venv-$v
  # 3.14t: each package's newest release, as scripts/free_threaded.sh; 3.13t: pip's choice (the
  # newest numpy, pandas, pyarrow... dropped their cp313t wheels, older releases have them)
  mode=spec; [ "$v" = 3.14t ] && mode=newest
  if ! make_test_venv "$py" "$venv" "$mode"; then   # pyprod's own dependency has no wheel here
    status=1
    printf '| %s | %s | %s | not run: %s | | | | | %s |\n' "$v" "$("$py" -c 'import platform; print(platform.python_version())')" \
      "$(source_of "$v")" "$(cat "$venv/.pyprod-core-failed")" "$(git rev-parse --short HEAD)" > "$results/$v.row"
    : > "$results/$v.log"
    write_results
    continue
  fi
  vpy=$venv/bin/python
  "$vpy" -c 'import sys; print("pythons:", sys.version.replace(chr(10), " "))'
  kcore_for "$v" "$vpy"
  [ "$build_only" = 1 ] && continue
  work=$cache/kcore-$v
  envs=(-u PYPROD_NO_EXTENSIONS -u PYTHON_GIL PYTHONPATH="$work/src:$repo/src:$repo")
  # 3.13t: the GIL held off, cramjam 2.11.0 would turn it on (scripts/lib/cramjam_313t.sh)
  # and the TLS test certificates come from another interpreter's cryptography (cffi refuses 3.13t)
  if [ "$v" = 3.13t ]; then
    cert_py=$(cert_python)
    envs=(-u PYPROD_NO_EXTENSIONS PYTHON_GIL=0 PYTHONPATH="$work/src:$repo/src:$repo" PYPROD_CERT_PYTHON="$cert_py")
  fi
  env "${envs[@]}" "$vpy" -c 'import kcore; assert kcore.EXTENSIONS, "kcore: the pure twins, not the compiled modules"' \
    || die "kcore-$v does not import compiled"
  if [ ${#pytest_args[@]} -gt 0 ]; then
    env "${envs[@]}" nice -n 10 "$vpy" -m pytest -p no:cacheprovider -o "pythonpath=$work/src $repo/src $repo" "${pytest_args[@]}" || status=1
    continue
  fi
  commit=$(git rev-parse --short HEAD)
  [ -n "$(git status --porcelain -- src tests setup.py pyproject.toml)" ] && commit="$commit+local"
  log=$results/$v.log t0=$(date +%s)
  say "$v: pytest ${test_dirs[*]} (log: $log)"
  rc=0
  env "${envs[@]}" nice -n 10 "$vpy" -m pytest -q -rfEs -p no:cacheprovider \
    -o "pythonpath=$work/src $repo/src $repo" "${test_dirs[@]}" > "$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - t0 ))
  tail -1 "$log"
  # the counts from pytest's last line ("3 failed, 1020 passed, 5 skipped, 1 error in 300.1s")
  count() { tail -1 "$log" | grep -oE "[0-9]+ $1" | cut -d' ' -f1 || true; }
  passed=$(count passed) failed=$(count failed) skipped=$(count skipped) errors=$(count error)
  note=""; [ "$v" = 3.13t ] && note=" (PYTHON_GIL=0, cramjam $CRAMJAM_313T)"
  if grep -q 'NO APACHE KAFKA BROKER' "$log"; then note=" (tansu, not Kafka!)"; rc=1; fi
  [ "$rc" = 0 ] || status=1
  version=$("$vpy" -c 'import sys; print(sys.version.split()[0])')
  printf '| %s | %s | %s | %s | %s | %s | %s | %ss | %s%s |\n' "$v" "$version" "$(source_of "$v")" \
    "${passed:-0}" "${failed:-0}" "${skipped:-0}" "${errors:-0}" "$secs" "$commit" "$note" > "$results/$v.row"
  write_results
done
exit $status
