# Sourced by scripts/wheels.sh: for one ABI (cp310 ... cp314t) and architecture, the CPython to
# compile against and, where one is reachable here, to run the tests with.
#   locate_python ABI ARCH  sets P_INC (a folder with Python.h and that build's pyconfig.h),
#     P_SUFFIX (the modules' suffix), P_RUN (the command that runs the interpreter: empty when
#     there is none), P_DESC (where it came from), P_LINKS (pip's --find-links for what the
#     test step installs from source: cp313t's cramjam, as cibuildwheel's before-test builds it).
# Sources: x86_64: ~/.cache/pyprod/cpython-X.Y[t] (scripts/pythons.sh, free_threaded.sh), else
# the machine's pythonX.Y, else Maven Central's org.bytedeco:cpython (upstream's release built by
# the JavaCPP project: bin, lib, include). aarch64: Debian's arm64 python3.11 (bookworm) and
# python3.13 (trixie) unpacked by mmdebstrap, org.bytedeco:cpython linux-arm64 for 3.10, 3.12 and
# 3.14 (run with bookworm's arm64 libc), all under qemu-aarch64.
# Free-threaded arm64 (cp313t, cp314t; Debian and org.bytedeco have none): CPython cross-built
# here (scripts/lib/cpython_arm64.sh; PYPROD_FT_ARM64_BUILD=1 builds it) runs cp314t under
# qemu-aarch64 with bookworm's root (cp313t: with cramjam 2.11.0 cross-built, PYTHON_GIL=0).
# Otherwise the same version's headers with Py_GIL_DISABLED defined, which is all --disable-gil
# changes in pyconfig.h: built, not run.

declare -A JAR_VERSION=([3.10]=3.10.8-1.5.8 [3.12]=3.12.1-1.5.10 [3.13]=3.13.5-1.5.12
                        [3.14]=3.14.3-1.5.13)
PY_CACHE=${PYPROD_PYTHONS_CACHE:-$HOME/.cache/pyprod}
# arm64_root ROOT SUITE PKGS WHAT: Debian SUITE's arm64 PKGS unpacked into ROOT by mmdebstrap
# (this machine's apt mirror), once per SUITE and PKGS; merged /usr links
arm64_root() {
  local root=$1 suite=$2 pkgs=$3 mirror d
  [ "$(cat "$root/.pyprod-packages" 2>/dev/null)" = "$suite $pkgs" ] && return 0
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list)
  say "unpacking $4 ($pkgs) into $root (this machine's apt mirror)" >&2
  rm -rf "$root"
  nice -n 10 mmdebstrap --quiet --arch=arm64 --variant=extract --include="$pkgs" \
    "$suite" "$root" "$mirror" > "$root.mmdebstrap.log" 2>&1 \
    || { tail "$root.mmdebstrap.log" >&2; return 1; }
  for d in lib bin sbin; do [ -e "$root/$d" ] || ln -s "usr/$d" "$root/$d"; done
  echo "$suite $pkgs" > "$root/.pyprod-packages"
}

. "$(dirname "${BASH_SOURCE[0]}")/cpython_arm64.sh"

# the unpacked install of an org.bytedeco:cpython jar (VERSION CLASSIFIER), fetched with mvn
jar_prefix() {
  local v=$1 cls=$2 d=$W/jars/cpython-$1-$2 jar
  local p=$d/org/bytedeco/cpython/$cls
  if [ ! -e "$p/.pyprod-ok" ]; then
    jar=$HOME/.m2/repository/org/bytedeco/cpython/$v/cpython-$v-$cls.jar
    [ -f "$jar" ] || mvn -q dependency:get -Dtransitive=false \
      -Dartifact="org.bytedeco:cpython:$v:jar:$cls" >&2 || return 1
    rm -rf "$d"; mkdir -p "$d"; (cd "$d" && unzip -q "$jar" 'org/*') || return 1
    chmod +x "$p"/bin/*
    # _ctypes needs libffi.so.N (6 in 3.10, 7 in 3.12), at the top of the install: outside its RUNPATH
    local f; for f in "$p"/libffi.so.[0-9]*; do
      ln -sf "../../../${f##*/}" "$(echo "$p"/lib/python3.*/lib-dynload)/${f##*/}"
    done
    touch "$p/.pyprod-ok"
  fi
  echo "$p"
}

# Debian's arm64 root with pythonX.Y (SUITE VERSION), unpacked by mmdebstrap (no scripts run)
debian_root() {
  local suite=$1 v=$2 root=$W/rootfs-arm64-$1 pkgs ssl=libssl3
  [ "$suite" = bookworm ] || ssl=libssl3t64
  # the interpreter and what the test requirements' arm64 wheels load (pyarrow: libstdc++)
  pkgs="python$v,libpython$v-dev,libpython$v-stdlib,zlib1g,libffi8,$ssl,libstdc++6,libgcc-s1"
  arm64_root "$root" "$suite" "$pkgs" "Debian $suite arm64 with python$v" || return 1
  echo "$root"
}

# the include folder for the build: INCDIR's headers, PYCONFIG as pyconfig.h (Debian keeps the
# real one in a multiarch folder), Py_GIL_DISABLED added for a free-threaded ABI
make_inc() {
  local src=$1 pyconfig=$2 ft=$3 dst=$W/include/$abi-$arch
  rm -rf "$dst"; mkdir -p "$dst"; cp -r "$src"/. "$dst"/; cp "$pyconfig" "$dst/pyconfig.h"
  # configure.ac: --disable-gil defines Py_GIL_DISABLED, and needs mimalloc (WITH_MIMALLOC)
  if [ -n "$ft" ] && ! grep -q '^#define WITH_MIMALLOC 1' "$dst/pyconfig.h"; then
    P_DESC="$pyconfig has no WITH_MIMALLOC: no free-threaded build of it"; return 1
  fi
  if [ -n "$ft" ] && ! grep -q '^#define Py_GIL_DISABLED 1' "$dst/pyconfig.h"; then
    printf '\n/* scripts/wheels.sh: free-threaded (configure --disable-gil) */\n#define Py_GIL_DISABLED 1\n' \
      >> "$dst/pyconfig.h"
  fi
  P_INC=$dst
}

# a native interpreter's include folder and real pyconfig.h
native_inc() {
  local py=$1 ft=$2 inc cfg
  read -r inc cfg < <("$py" -c 'import sysconfig as s; print(s.get_path("include"), s.get_config_h_filename())')
  # Debian's /usr/include/python3.X/pyconfig.h only includes the multiarch one
  if grep -q 'include <.*-linux-gnu/python' "$cfg"; then
    cfg=$(dirname "$(dirname "$inc")")/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/$(basename "$inc")/pyconfig.h
  fi
  make_inc "$inc" "$cfg" "$ft" || return 1
}

locate_python() {
  abi=$1 arch=$2
  local ver=3.${abi:3:2} ft="" py="" p root
  ver=${ver%t}; [ "${abi: -1}" = t ] && ft=t
  P_SUFFIX=".cpython-${abi#cp}-$arch-linux-gnu.so"; P_RUN=(); P_INC=""; P_DESC=""; P_LINKS=()
  if [ "$arch" = x86_64 ]; then
    local cached=$PY_CACHE/cpython-$ver$ft  # only a finished install (its stamp is written last)
    [ -e "$cached/.pyprod-build" ] || cached=/nonexistent
    for p in ${PYTHON:+"$(command -v "$PYTHON")"} "$cached/bin/python$ver$ft" \
             $([ -z "$ft" ] && command -v "python$ver" || true); do
      if [ -x "$p" ] && "$p" -c 'import sys, sysconfig; sys.exit(sys.version_info[:2] != tuple(map(int, sys.argv[1].split("."))) or bool(sysconfig.get_config_var("Py_GIL_DISABLED")) != bool(sys.argv[2]))' "$ver" "$ft" 2>/dev/null; then
        py=$p; P_DESC="$("$p" -c 'import platform; print(platform.python_version())') ($p)"; break
      fi
    done
    if [ -z "$py" ] && [ -n "${JAR_VERSION[$ver]:-}" ]; then
      p=$(jar_prefix "${JAR_VERSION[$ver]}" linux-x86_64) || return 1
      if [ -z "$ft" ]; then
        py=$p/bin/python$ver; P_DESC="${JAR_VERSION[$ver]%-*} (org.bytedeco:cpython ${JAR_VERSION[$ver]})"
      else
        make_inc "$p/include/python$ver" "$p/include/python$ver/pyconfig.h" t || return 1
        P_DESC="none here: headers of ${JAR_VERSION[$ver]%-*} (org.bytedeco:cpython) + Py_GIL_DISABLED"
        return 0
      fi
    fi
    [ -n "$py" ] || { P_DESC="no CPython $ver$ft here"; return 1; }
    native_inc "$py" "$ft" || return 1; P_RUN=("$py")
    if [ "$abi" = cp313t ]; then
      cramjam_313t_wheels "$py" "$W/cramjam-cp313t"; P_LINKS=(--find-links "$W/cramjam-cp313t")
    fi
    return 0
  fi
  # cp313t: also cibuildwheel's before-test (cramjam from source), cross-built; without it: not run
  local cj=$W/cramjam-cp313t-aarch64
  if [ -n "$ft" ] && p=$(ft_arm64_python "$ver") \
     && { [ "$ver" != 3.13 ] || cramjam_313t_arm64 "$p" "$cj"; }; then
    [ "$ver" != 3.13 ] || P_LINKS=(--find-links "$cj")
    root=$(debian_root bookworm 3.11) || return 1  # its libc, libssl, libffi for qemu -L
    make_inc "$p/include/python${ver}t" "$p/include/python${ver}t/pyconfig.h" t || return 1
    P_DESC="$(sed -n 's/^#define PY_VERSION *"\(.*\)"/\1/p' "$P_INC/patchlevel.h") free-threaded (cross-built here: $p)"
    P_RUN=(qemu-aarch64 -L "$root" "$p/bin/python${ver}t"); return 0
  fi
  case $ver in
    3.11|3.13)
      local suite=bookworm; [ "$ver" = 3.13 ] && suite=trixie
      root=$(debian_root "$suite" "$ver") || return 1
      make_inc "$root/usr/include/python$ver" "$root/usr/include/aarch64-linux-gnu/python$ver/pyconfig.h" "$ft" || return 1
      P_DESC="$(sed -n 's/^#define PY_VERSION *"\(.*\)"/\1/p' "$P_INC/patchlevel.h") (Debian $suite's python$ver)"
      [ -z "$ft" ] && P_RUN=(qemu-aarch64 -L "$root" "$root/usr/bin/python$ver") ;;
    *)
      [ -n "${JAR_VERSION[$ver]:-}" ] || { P_DESC="no arm64 CPython $ver here"; return 1; }
      p=$(jar_prefix "${JAR_VERSION[$ver]}" linux-arm64) || return 1
      root=$(debian_root bookworm 3.11) || return 1  # its libc, libstdc++ for qemu -L
      make_inc "$p/include/python$ver" "$p/include/python$ver/pyconfig.h" "$ft" || return 1
      P_DESC="${JAR_VERSION[$ver]%-*} (org.bytedeco:cpython ${JAR_VERSION[$ver]} linux-arm64)"
      [ -z "$ft" ] && P_RUN=(qemu-aarch64 -L "$root" "$p/bin/python$ver") ;;
  esac
  if [ -n "$ft" ]; then P_DESC="none here: headers of $P_DESC + Py_GIL_DISABLED"; fi
  if [ -n "$ft" ] && [ -n "$p" ] && [ -e "$p/.pyprod-build" ]; then   # cp313t: the cramjam is missing
    P_DESC+="; not run: no arm64 cp313t cramjam (PYPROD_FT_ARM64_BUILD=1 cross-builds it)"
  fi
  return 0
}
