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
# The source (Debian's archive, upstream's release tarball) and the build: scripts/lib/cpython.sh.
SAY_AS=free-threaded
. "$(dirname "$0")/lib/cpython.sh"

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

# --- CPython -----------------------------------------------------------------------------------
python=$prefix/bin/python3.14t
cpython_install_opts=()
# Under TSan the install's byte-compilation of the whole library (3 optimisation levels) ran
# 20+ minutes on 2 cores: there, only the library's top level is compiled (-l); the rest is
# compiled on first import.
[ "$tsan" = 1 ] && cpython_install_opts=(COMPILEALL_OPTS="-j0 -l")
build_cpython "$name" python3.14 "${configure_flags[@]}"
"${run[@]}" "$python" -c 'import sys, sysconfig; assert sysconfig.get_config_var("Py_GIL_DISABLED"); assert not sys._is_gil_enabled()' \
  || die "$python is not a free-threaded build"

# --- the venv ------------------------------------------------------------------------------------
# The kernel tests' needs, then which of the test extra's other packages have a cp314t wheel
# (their newest releases; scripts/lib/cpython.sh, make_test_venv).
if [ "$no_peers" = 1 ]; then
  make_test_venv "$python" "$venv" none
  say "--no-peers: the test extras' other packages are not tried (the last table, if any, follows)"
else
  make_test_venv "$python" "$venv" newest
fi
vpy=$venv/bin/python
[ -e "$venv/.pyprod-peers" ] && tail -n +2 "$venv/.pyprod-peers" | sed 's/^/free-threaded:   /'
"${run[@]}" "$vpy" -c 'import Cython, sys; print("free-threaded: venv", sys.version.split()[0], "Cython", Cython.__version__)'
[ "$build_only" = 1 ] && exit 0

# --- kcore, a private copy -------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/pyprod-ft.XXXXXX")
trap 'rm -rf "$work"' EXIT
copy_kcore "$work"
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
plain=$cache/venv-3.14t/bin/python
if [ "$tsan" = 1 ] && "$plain" -c 'import Cython' 2>/dev/null; then
  # Cythonizing under the instrumented interpreter took over 7 minutes; the generated C does not
  # depend on the interpreter, so the plain 3.14t venv writes it (setup.py cythonizes when it is
  # loaded; the TSan build below then finds the .c files current and only compiles them).
  say "cythonizing with $plain (the TSan build compiles the C)"
  (cd "$work" && nice -n 10 "$plain" setup.py -q --name >cythonize.log 2>&1) \
    || { tail -20 "$work/cythonize.log" >&2; die "cythonize failed"; }
fi
build_kcore "$vpy" "$work" "$cflags" "$ldflags"

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
