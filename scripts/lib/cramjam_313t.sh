# cramjam on free-threaded CPython 3.13 (3.13t): sourced by scripts/lib/cpython.sh (so by
# scripts/pythons.sh) and by scripts/wheels.sh; bash only; the caller defines say() and die().
#
# cramjam, pyprod's one dependency, publishes no cp313t wheel, and its source packages from 2.12
# on use PyO3 0.29, which refuses the free-threaded build of any CPython below 3.14. 2.11.0 (PyO3
# 0.25) is the newest that builds there: from its source package, with Rust. Its module does not
# declare that it runs without the GIL, so importing it turns the GIL on unless PYTHON_GIL=0
# (the runs here set it). pyproject.toml's cibuildwheel override for cp313t does the same.
CRAMJAM_313T=2.11.0

cramjam_313t_wheels() {   # cramjam_313t_wheels PYTHON DIR: DIR holds a cp313t cramjam wheel (built once)
  local py=$1 dir=$2
  mkdir -p "$dir"
  if ls "$dir"/cramjam-$CRAMJAM_313T-cp313-cp313t-*.whl >/dev/null 2>&1; then return 0; fi
  command -v cargo >/dev/null || die "cramjam $CRAMJAM_313T for 3.13t builds from source with Rust: no cargo on PATH"
  say "building cramjam $CRAMJAM_313T for cp313t from its source package (Rust; about 2 min)"
  nice -n 10 "$py" -m pip wheel -q --no-deps --no-binary cramjam "cramjam==$CRAMJAM_313T" -w "$dir" \
    > "$dir/cramjam-build.log" 2>&1 || die "the cramjam $CRAMJAM_313T build failed: $dir/cramjam-build.log"
}
