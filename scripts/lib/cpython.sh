# CPython from its release sources, a venv with the test extras, kcore compiled privately: the
# code scripts/free_threaded.sh and scripts/pythons.sh share (sourced by both; bash only).
# Sourcing it: strict mode, the working directory and $repo the checkout, say() and die() with
# the prefix $SAY_AS (set it first). The caller then sets: cache (the cache dir), jobs
# (make/compile -j), run (an array prefixed to every command that runs the built python: empty,
# or setarch -R under TSan), cpython_install_opts (array of extra `make install` arguments; may
# be empty).
#
# The source: Debian's archive carries CPython 3.13 and 3.14 (python3.13, python3.14, in unstable
# and testing); their .orig.tar.xz is upstream's release tarball (the release tag's source,
# Python-3.x.y/), used as it is: none of Debian's patches. A private apt config (deb-src lines for
# those suites on the machine's own Debian mirror; the machine's apt sources are not changed)
# fetches the newest version the signed index lists with `apt-get source --download-only`, which
# checks the files against the index. When the mirror's pool lacks every version the index lists
# (a mirror that lags behind its index), the pinned release below is fetched from the pool instead
# and checked twice: against the sha256 in its .dsc, whose maintainer signature gpgv checks with
# debian-keyring, and against the pinned sha256.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
say() { printf '%s: %s\n' "$SAY_AS" "$*"; }
die() { say "$*" >&2; exit 1; }
. scripts/lib/cramjam_313t.sh
. scripts/lib/librdkafka.sh

# package -> "version sha256 dsc" of the fallback release (the sha256 as in the signed .dsc)
declare -A CPYTHON_PIN=(
  [python3.14]="3.14.7 3b48dac8fb59f62eaa67ac83c1eb12bda1b7a08406dd286e252c11a66be27f81 python3.14_3.14.7-1.dsc"
  [python3.13]="3.13.15 1e66a7945a48390ee4c2a4268a0e4185884059a13c4aab6d148aa208deea4a76 python3.13_3.13.15-1.dsc"
)

apt_install() {   # apt_install PKG...: the machine's own packages that are missing
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and there is no apt-get"
  local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  say "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

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

fetch_source() {   # fetch_source python3.X: prints the path of a verified python3.X_*.orig.tar.xz
  local pkg=$1 ok
  ok=$(ls -1 "$cache/src/${pkg}"_*.orig.tar.xz.verified 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$ok" ]; then echo "${ok%.verified}"; return; fi
  apt_install apt dpkg-dev debian-keyring xz-utils curl >&2
  local mirror apt_dir
  mirror=$(debian_mirror)
  apt_dir=$cache/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d" "$cache/src"
  {
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror sid main"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror forky main"
  } > "$apt_dir/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=$apt_dir/sources.list.d"
              -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
              -o "APT::Sandbox::User=root")
  say "reading Debian's source index for $pkg (private apt state in $apt_dir)" >&2
  apt-get -qq "${opts[@]}" update >&2 || say "apt-get update failed: trying the pinned release" >&2
  local v versions
  versions=$(apt-cache "${opts[@]}" showsrc "$pkg" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -Vru || true)
  for v in $versions; do
    local up=${v%-*}; up=${up#*:}
    if (cd "$cache/src" && apt-get -qq "${opts[@]}" source --download-only "$pkg=$v" >/dev/null 2>&1); then
      touch "$cache/src/${pkg}_$up.orig.tar.xz.verified"   # apt checked it against the signed index
      say "$pkg $v from Debian's archive (apt-get source, checked against the signed index)" >&2
      echo "$cache/src/${pkg}_$up.orig.tar.xz"; return
    fi
    say "$pkg $v is in the index but not in the mirror's pool" >&2
  done
  [ -n "${CPYTHON_PIN[$pkg]:-}" ] || die "no $pkg source in the mirror's pool and no pinned release"
  local pin_version pin_sha256 pin_dsc
  read -r pin_version pin_sha256 pin_dsc <<< "${CPYTHON_PIN[$pkg]}"
  say "falling back to the pinned release $pin_version" >&2
  local pool=$mirror/pool/main/p/$pkg tar=$cache/src/${pkg}_$pin_version.orig.tar.xz
  curl -fsS -o "$cache/src/$pin_dsc" "$pool/$pin_dsc" || die "cannot fetch $pin_dsc from Debian's archive"
  gpgv --keyring /usr/share/keyrings/debian-keyring.gpg "$cache/src/$pin_dsc" 2>/dev/null \
    || die "$pin_dsc: no good maintainer signature (debian-keyring)"
  local want
  want=$(awk '/^Checksums-Sha256:/ {on=1; next} /^[^ ]/ {on=0} on && $3 ~ /orig\.tar\.xz$/ {print $1}' "$cache/src/$pin_dsc")
  [ "$want" = "$pin_sha256" ] || die "$pin_dsc names sha256 $want, not the pinned $pin_sha256"
  [ -s "$tar" ] || curl -fsS -o "$tar" "$pool/${pkg}_$pin_version.orig.tar.xz" || die "cannot fetch the tarball"
  echo "$pin_sha256  $tar" | sha256sum -c --quiet - >&2 || { rm -f "$tar"; die "sha256 mismatch: $tar"; }
  touch "$tar.verified"
  echo "$tar"
}

# build_cpython NAME PKG FLAGS...: ./configure FLAGS (no PGO); make -j$jobs; make install into
# the --prefix among FLAGS; the build tree is $cache/build/NAME. An install whose stamp
# ($prefix/.pyprod-build: "<tarball> <flags>", then timings) matches is reused; one build at a
# time per NAME ($cache/NAME.lock).
build_cpython() {
  local name=$1 pkg=$2; shift 2
  local flags=("$@") prefix="" f tar want lockfd
  for f in "${flags[@]}"; do [ "${f#--prefix=}" != "$f" ] && prefix=${f#--prefix=}; done
  [ -n "$prefix" ] || die "build_cpython $name: no --prefix"
  tar=$(fetch_source "$pkg")
  want="$(basename "$tar") ${flags[*]}"
  exec {lockfd}>"$cache/$name.lock"; flock "$lockfd"
  if [ -x "$prefix/bin/python3" ] && [ "$(head -1 "$prefix/.pyprod-build" 2>/dev/null)" = "$want" ]; then
    say "$name already built ($(basename "$tar")): $prefix"
    exec {lockfd}>&-; return
  fi
  apt_install build-essential pkg-config libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev \
    libsqlite3-dev libreadline-dev libncurses-dev libgdbm-dev uuid-dev libzstd-dev libexpat1-dev
  local tree=$cache/build/$name t0 t1 t2
  rm -rf "$tree" "$prefix"; mkdir -p "$tree"
  tar xJf "$tar" -C "$tree" --strip-components=1
  say "building $name from $(basename "$tar"): ./configure ${flags[*]}; make -j$jobs (nice; logs in $tree)"
  t0=$(date +%s)
  (cd "$tree" && nice -n 10 ./configure "${flags[@]}" > configure.log 2>&1) \
    || { tail -30 "$tree/configure.log" >&2; die "configure failed ($tree/configure.log)"; }
  t1=$(date +%s)
  (cd "$tree" && nice -n 10 "${run[@]}" make -j"$jobs" > make.log 2>&1 \
     && nice -n 10 "${run[@]}" make install "${cpython_install_opts[@]}" > install.log 2>&1) \
    || { tail -30 "$tree/make.log" "$tree/install.log" >&2 2>/dev/null; die "make failed (logs in $tree)"; }
  t2=$(date +%s)
  { echo "$want"; echo "configure $((t1 - t0))s, make+install $((t2 - t1))s, jobs=$jobs, $(nproc) cores"; } \
    > "$prefix/.pyprod-build"
  say "built $name in $((t2 - t0))s (configure $((t1 - t0))s, make+install $((t2 - t1))s)"
  exec {lockfd}>&-
}

# make_test_venv PYTHON VENV MODE: a venv with kcore's build and kernel-test needs (a failure
# stops), then every other package of pyproject.toml's test extra one by one, binary wheels only
# (no long source builds); $VENV/.pyprod-peers is the table of what installs. MODE newest: each
# package's newest release, pinned, whatever the extra's bounds (the question is only whether a
# wheel for this interpreter exists: unpinned, pip would backtrack to an old release that happens
# to have a pure-Python wheel and report that as a success). MODE spec: the extra's own
# requirement, pip's choice; pyspark left out (the Spark tests are not run on these venvs). The
# packages published as source only (no Linux wheel at all: pyspark, gssapi) build from it.
# Returns 1 (the reason in $VENV/.pyprod-core-failed) when the core packages do not install.
make_test_venv() {
  local python=$1 venv=$2 mode=$3
  local core=("Cython>=3.1" "setuptools>=77" "pytest>=8" "pytest-benchmark>=4" "hypothesis>=6.100"
              "crc32c>=2.3" "cramjam>=2.8" "kafka-python>=2.0.2" "lz4")
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    "${run[@]}" "$python" -m venv "$venv"
  fi
  local vpy=$venv/bin/python tag peers
  tag=$("${run[@]}" "$vpy" -c 'import sys, sysconfig
print("cp%d%d%s" % (*sys.version_info[:2], "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
  # lz4 publishes no free-threaded wheel: the kernel tests stand cramjam in for it there
  local c kept=()
  for c in "${core[@]}"; do [ "$c" = lz4 ] && [[ $tag == *t ]] || kept+=("$c"); done
  core=("${kept[@]}")
  if [ ! -e "$venv/.pyprod-core" ]; then
    say "installing ${core[*]}"
    "${run[@]}" "$vpy" -m pip install -q --upgrade pip
    local links=()   # cp313t: cramjam from its source package (scripts/lib/cramjam_313t.sh)
    if [ "$tag" = cp313t ]; then cramjam_313t_wheels "$vpy" "$cache/wheels-cp313t"; links=(--find-links "$cache/wheels-cp313t"); fi
    if ! "${run[@]}" "$vpy" -m pip install -q --only-binary :all: "${links[@]}" "${core[@]}" >"$venv/.pip-core.log" 2>&1; then
      grep -m1 -oE 'No matching distribution found for [^ ]+' "$venv/.pip-core.log" \
        | sed "s/^No matching distribution found for /no $tag wheel: /" > "$venv/.pyprod-core-failed"
      say "the core packages do not install on $tag: $(cat "$venv/.pyprod-core-failed")"
      return 1
    fi
    rm -f "$venv/.pyprod-core-failed"
    : > "$venv/.pyprod-core"
  fi
  [ "$mode" = none ] && return 0
  # "name<TAB>requirement" of each test-extra package not in core (read without tomllib: 3.10)
  peers=$(cd "$repo" && "${run[@]}" "$vpy" - "$mode" <<'EOF'
import re, sys
core = {"cython", "setuptools", "pytest", "pytest-benchmark", "hypothesis", "crc32c", "cramjam",
        "kafka-python", "lz4"}
text = open("pyproject.toml").read()
block = re.search(r"^test = \[(.*?)^\]", text, re.S | re.M).group(1)
for req in re.findall(r'^\s*"([^"]+)"', block, re.M):
    name = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]
    if name.lower() in core or (sys.argv[1] == "spec" and name == "pyspark"):
        continue
    print(f"{name}\t{req}")
EOF
)
  local sources=(pyspark gssapi)   # no Linux wheel at all: built from the source package
  declare -A pin=()
  if [ "$tag" = cp313t ]; then
    # confluent-kafka (the harness's admin client, a reader) has no cp313t wheel: built from
    # source against librdkafka 2.15.1, itself built from source (scripts/lib/librdkafka.sh)
    pin[confluent-kafka]=$(confluent_kafka_313t "$vpy") || die "no confluent-kafka for cp313t"
    sources+=(confluent-kafka)
  fi
  local header="# $mode $(echo "$peers" | cut -f1 | tr '\n' ' ' | sed 's/ $//') (from source: ${sources[*]})${pin[*]:+ ${pin[*]}}"
  if [ "$(head -1 "$venv/.pyprod-peers" 2>/dev/null)" = "$header" ]; then return 0; fi
  say "installing the test extra's other packages ($mode, binary wheels only)"
  local p req spec latest extra
  while IFS=$'\t' read -r p req; do
    extra=(--only-binary :all:); [[ " ${sources[*]} " == *" $p "* ]] && extra+=(--no-binary "$p")
    latest=""; spec=$req
    if [ "$mode" = newest ]; then
      latest=$("${run[@]}" "$vpy" -m pip index versions "$p" 2>/dev/null | sed -n '1s/.*(\(.*\)).*/\1/p')
      spec=$p; [ -n "$latest" ] && spec="$p==$latest"
    fi
    [ -n "${pin[$p]:-}" ] && spec=${pin[$p]}
    if "${run[@]}" "$vpy" -m pip install -q "${extra[@]}" "$spec" >"$venv/.pip-$p.log" 2>&1; then
      [ -z "$latest" ] && latest=$("${run[@]}" "$vpy" -m pip show "$p" 2>/dev/null | sed -n 's/^Version: //p')
      printf '%-26s %-8s installs\n' "$p" "$latest"
    else
      printf '%-26s %-8s does not install: %s\n' "$p" "$latest" \
        "$(grep -m1 -oE 'requirement [^ ]+|No matching distribution found for [^ ]+' "$venv/.pip-$p.log" \
           | sed "s/^requirement /no $tag wheel: /;s/^No matching distribution found for /no $tag wheel: /")"
    fi
  done <<< "$peers" > "$venv/.pyprod-peers.body"
  { echo "$header"; cat "$venv/.pyprod-peers.body"; } > "$venv/.pyprod-peers.tmp"
  rm -f "$venv/.pyprod-peers.body"
  mv "$venv/.pyprod-peers.tmp" "$venv/.pyprod-peers"
}

# copy_kcore DIR: a private copy of the checkout's kcore sources in DIR (setup.py, pyproject.toml,
# src/kcore without built or generated files), so the in-tree .so files are untouched
copy_kcore() {
  local work=$1
  mkdir -p "$work/src"
  cp "$repo/setup.py" "$repo/pyproject.toml" "$work/"
  : > "$work/README.md"   # pyproject.toml names it
  rm -rf "$work/src/kcore"
  cp -r "$repo/src/kcore" "$work/src/"
  rm -rf "$work/src/kcore/__pycache__" "$work/src/kcore"/*/__pycache__ "$work/src/kcore"/*.so
  local pyx
  for pyx in "$work"/src/kcore/*.pyx; do rm -f "${pyx%.pyx}.c"; done   # generated, not *_impl.c
}

# build_kcore VPY DIR CFLAGS LDFLAGS: compile the copy in DIR with the venv's python
build_kcore() {
  local vpy=$1 work=$2 cflags=$3 ldflags=$4 t0
  t0=$(date +%s)
  say "compiling kcore in $work (CFLAGS=$cflags)"
  if ! (cd "$work" && CFLAGS="$cflags" LDFLAGS="$ldflags" nice -n 10 "${run[@]}" "$vpy" setup.py -q build_ext --inplace -j "$jobs" >build.log 2>&1); then
    tail -40 "$work/build.log" >&2
    die "kcore build failed"
  fi
  say "kcore compiled in $(( $(date +%s) - t0 ))s"
}
