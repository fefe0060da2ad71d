#!/usr/bin/env bash
# kcore under AddressSanitizer and UndefinedBehaviorSanitizer (Linux, gcc): builds a private copy
# of src/kcore with the sanitizers compiled in (a temp dir; the in-tree .so files are untouched),
# then runs the kernel and producer unit tests and the stress rounds (a real broker) on it (or
# the pytest arguments given).
#   scripts/sanitize.sh                       tests/kernels tests/producer tests/fuzz and
#                                             tests/integration/test_concurrency_stress.py
#   scripts/sanitize.sh tests/kernels/test_crc.py -x
# CPython itself is not instrumented: libasan is LD_PRELOADed so its runtime comes first.
# detect_leaks=0: CPython keeps its interned objects and module state alive at exit by design.
# PYTHONMALLOC=malloc: Python objects come from malloc, so ASan also sees writes past a bytes or
# bytearray object that kcore fills (pymalloc's arenas would hide them).
# setup.py's -O3 comes after CFLAGS, so the tests run the optimised code that ships.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${VIRTUAL_ENV:-}" ] || . .venv/bin/activate
say() { printf 'sanitize: %s\n' "$*"; }

libasan=$(gcc -print-file-name=libasan.so)
if [ ! -e "$libasan" ] || [ "$libasan" = libasan.so ]; then
  say "gcc has no libasan (install libasan for your gcc)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp setup.py pyproject.toml "$work/"
: > "$work/README.md"   # pyproject.toml names it
cp -r src/kcore "$work/src/"
rm -rf "$work/src/kcore/__pycache__" "$work/src/kcore"/*/__pycache__ "$work/src/kcore"/*.so
for pyx in "$work"/src/kcore/*.pyx; do rm -f "${pyx%.pyx}.c"; done   # generated, not *_impl.c

flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
say "building kcore with $flags in $work"
if ! (cd "$work" && CFLAGS="$flags -O1 -g" LDFLAGS="-fsanitize=address,undefined" \
      python setup.py -q build_ext --inplace -j "$(nproc)" >build.log 2>&1); then
  cat "$work/build.log" >&2
  say "build failed" >&2
  exit 1
fi

[ $# -gt 0 ] || set -- tests/kernels tests/producer tests/fuzz tests/integration/test_concurrency_stress.py
say "python -m pytest $* (sanitized kcore)"
# The plugin stops the session unless every kcore module is the sanitized one.
env -u PYPROD_NO_EXTENSIONS \
  LD_PRELOAD="$libasan${LD_PRELOAD:+:$LD_PRELOAD}" \
  ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
  PYTHONMALLOC=malloc \
  PYPROD_SANITIZE_BUILD="$work/src" \
  PYTHONPATH="$work/src:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" \
  python -m pytest -p sanitize_plugin -p no:cacheprovider \
    -o "pythonpath=$work/src $PWD/src" "$@"
