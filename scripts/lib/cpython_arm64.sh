# Free-threaded CPython for arm64, cross-compiled here (issue 41): neither Debian nor Maven's
# org.bytedeco:cpython nor PyPI carries one, so cp313t/cp314t aarch64 wheels had no interpreter.
# Sourced by scripts/lib/wheels_pythons.sh (bash; the caller defines say(), W and PY_CACHE).
#   ft_arm64_python VER  prints PY_CACHE/cpython-VERt-aarch64 once it holds a finished install
#     (its stamp .pyprod-build is written last); builds it when missing and PYPROD_FT_ARM64_BUILD=1
#     (a build takes 20-40 min on 2 shared cores), else returns 1.
# Sources: the release tarballs scripts/lib/cpython.sh fetches and verifies (its cache's src/);
# the native build python of the same version (scripts/pythons.sh: PY_CACHE/cpython-VERt);
# Debian's cross gcc (gcc-aarch64-linux-gnu) against an arm64 sysroot unpacked by mmdebstrap with
# the -dev packages of the ssl, ctypes, zlib, bz2, lzma modules. No PGO, no LTO; runs under
# qemu-aarch64 with the bookworm root's libraries (the same suite as the sysroot).

FT_ARM64_DEV="libc6-dev,libssl-dev,libffi-dev,zlib1g-dev,libbz2-dev,liblzma-dev"

ft_arm64_sysroot() {   # the arm64 bookworm sysroot with FT_ARM64_DEV
  local root=$W/sysroot-arm64-bookworm
  arm64_root "$root" bookworm "$FT_ARM64_DEV" "the arm64 sysroot" || return 1
  echo "$root"
}

ft_arm64_python() {
  local ver=$1 prefix=$PY_CACHE/cpython-$1t-aarch64 tar build root tree t0 t1
  [ -e "$prefix/.pyprod-build" ] && { echo "$prefix"; return 0; }
  [ "${PYPROD_FT_ARM64_BUILD:-0}" = 1 ] || return 1
  tar=$(ls -1 "$PY_CACHE"/src/python"$ver"_*.orig.tar.xz.verified 2>/dev/null | sort -V | tail -1)
  build=$PY_CACHE/cpython-${ver}t/bin/python${ver}t
  [ -n "$tar" ] && [ -x "$build" ] || { say "no $ver source or native ${ver}t: run scripts/pythons.sh" >&2; return 1; }
  tar=${tar%.verified}
  command -v aarch64-linux-gnu-gcc >/dev/null \
    || apt-get install -y -qq gcc-aarch64-linux-gnu > /dev/null || return 1
  root=$(ft_arm64_sysroot) || return 1
  tree=$PY_CACHE/build/cpython-${ver}t-aarch64
  rm -rf "$tree" "$prefix"; mkdir -p "$tree"; tar xJf "$tar" -C "$tree" --strip-components=1
  # what a cross configure cannot probe on the target
  printf 'ac_cv_file__dev_ptmx=yes\nac_cv_file__dev_ptc=no\nac_cv_buggy_getaddrinfo=no\n' > "$tree/config.site"
  say "cross-building CPython $(basename "$tar") --disable-gil for aarch64 (logs in $tree)" >&2
  t0=$(date +%s)
  (cd "$tree" && CONFIG_SITE=$tree/config.site PKG_CONFIG_SYSROOT_DIR=$root \
     PKG_CONFIG_LIBDIR=$root/usr/lib/aarch64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig \
     nice -n 15 ./configure --host=aarch64-linux-gnu --build="$(gcc -dumpmachine)" \
       CC="aarch64-linux-gnu-gcc --sysroot=$root" --with-build-python="$build" \
       --disable-gil --prefix="$prefix" --with-ensurepip=no --disable-test-modules \
       > configure.log 2>&1 \
   && nice -n 15 make -j2 > make.log 2>&1 && nice -n 15 make install > install.log 2>&1) \
    || { tail -n 20 "$tree"/*.log >&2; say "the aarch64 ${ver}t build failed: $tree" >&2; return 1; }
  t1=$(date +%s)
  { echo "$(basename "$tar") --host=aarch64-linux-gnu --disable-gil"; echo "cross build $((t1 - t0))s, -j2, $(nproc) cores"; } \
    > "$prefix/.pyprod-build"
  echo "$prefix"
}

# cramjam_313t_arm64 PREFIX DIR: DIR holds cramjam $CRAMJAM_313T for arm64 cp313t (built once,
# with PYPROD_FT_ARM64_BUILD=1): its source package cross-compiled with Rust's
# aarch64-unknown-linux-gnu target (rustup), PyO3 reading the target's sysconfig from the
# cross-built 3.13t at PREFIX, C parts and link by maturin's --zig (wheels.sh's zig, as $zig)
# against glibc 2.28, so tagged manylinux_2_28 after maturin's own check of its symbols (the
# bookworm sysroot's glibc 2.36 gave GLIBC_2.34 symbols)
cramjam_313t_arm64() {
  local prefix=$1 dir=$2 host=$PY_CACHE/venv-3.13t/bin/python
  ls "$dir"/cramjam-$CRAMJAM_313T-cp313-cp313t-manylinux*aarch64.whl >/dev/null 2>&1 && return 0
  [ "${PYPROD_FT_ARM64_BUILD:-0}" = 1 ] || return 1
  rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu >&2 || return 1
  mkdir -p "$dir"; say "cross-building cramjam $CRAMJAM_313T for arm64 cp313t (Rust, zig)" >&2
  PATH=$(dirname "$zig"):$PATH CARGO_ZIGBUILD_ZIG_PATH=$zig \
  PYO3_CROSS_LIB_DIR=$prefix/lib/python3.13t PYO3_CROSS_PYTHON_VERSION=3.13 \
  MATURIN_PEP517_ARGS="--target aarch64-unknown-linux-gnu --zig --compatibility manylinux_2_28" \
    nice -n 15 "$host" -m pip wheel -q --no-cache-dir --no-deps --no-binary cramjam "cramjam==$CRAMJAM_313T" -w "$dir" \
    > "$dir/cramjam-build.log" 2>&1 || { tail -n 5 "$dir/cramjam-build.log" >&2; return 1; }
  ls "$dir"/cramjam-$CRAMJAM_313T-cp313-cp313t-manylinux*aarch64.whl >/dev/null 2>&1 \
    || { say "no manylinux aarch64 cramjam wheel: $dir" >&2; return 1; }
}
