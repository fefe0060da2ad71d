# librdkafka 2.15.1 from source and confluent-kafka built against it, for free-threaded 3.13
# (3.13t): sourced by scripts/lib/cpython.sh (make_test_venv's cp313t branch); bash only; the
# caller defines say(), die(), apt_install(), $cache and $jobs.
#
# confluent-kafka (the harness's admin client and a reader) publishes no cp313t wheel. Debian
# 12's librdkafka-dev is 2.0.2: it lacks rd_kafka_mock_start_request_tracking (the mock cluster
# harness), cannot parse tansu's ApiVersions, and confluent-kafka 2.0.2's SCRAM/OAUTHBEARER
# produce fails against the secured broker. librdkafka's source comes from the npm registry: the
# JavaScript client @confluentinc/kafka-javascript bundles it (deps/librdkafka). `npm pack`
# checks the tarball against the registry's integrity hash; the sha256 below is checked too.
# confluent-kafka's newest 2.15 source package is then built against that prefix with an rpath,
# so the extension (and the mock harness, which finds the library through the loaded
# extension's mappings) uses 2.15.1 without LD_LIBRARY_PATH.
LIBRDKAFKA_VERSION=2.15.1
LIBRDKAFKA_HEX=0x020f01ff   # RD_KAFKA_VERSION in its rdkafka.h
LIBRDKAFKA_NPM=@confluentinc/kafka-javascript@1.10.1
LIBRDKAFKA_NPM_SHA256=ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
LIBRDKAFKA_FLAGS=(--enable-ssl --enable-gssapi --enable-zlib --enable-zstd --enable-lz4-ext --disable-curl)
CONFLUENT_KAFKA_SPEC="confluent-kafka==2.15.*"

librdkafka_source() {   # librdkafka_source: prints the path of the verified npm tarball
  local dir=$cache/src/npm tgz
  tgz=$dir/confluentinc-kafka-javascript-${LIBRDKAFKA_NPM##*@}.tgz
  mkdir -p "$dir"
  if [ ! -s "$tgz" ]; then
    command -v npm >/dev/null || die "librdkafka $LIBRDKAFKA_VERSION comes from the npm registry: no npm on PATH"
    say "fetching $LIBRDKAFKA_NPM with npm pack (it bundles librdkafka $LIBRDKAFKA_VERSION)" >&2
    (cd "$dir" && npm pack -q "$LIBRDKAFKA_NPM" >/dev/null) || die "npm pack $LIBRDKAFKA_NPM failed"
  fi
  echo "$LIBRDKAFKA_NPM_SHA256  $tgz" | sha256sum -c --quiet - >&2 || { rm -f "$tgz"; die "sha256 mismatch: $tgz"; }
  echo "$tgz"
}

librdkafka_build() {   # librdkafka_build PREFIX: librdkafka installed in PREFIX (built once)
  local prefix=$1 tgz want tree lockfd t0
  tgz=$(librdkafka_source) || return 1
  want="$(basename "$tgz") ${LIBRDKAFKA_FLAGS[*]}"
  exec {lockfd}>"$prefix.lock"; flock "$lockfd"
  if [ -e "$prefix/lib/librdkafka.so.1" ] && [ "$(head -1 "$prefix/.pyprod-build" 2>/dev/null)" = "$want" ]; then
    exec {lockfd}>&-; return 0
  fi
  apt_install build-essential pkg-config libssl-dev libsasl2-dev zlib1g-dev libzstd-dev liblz4-dev
  tree=$cache/build/librdkafka-$LIBRDKAFKA_VERSION
  rm -rf "$tree" "$prefix"; mkdir -p "$tree"
  tar xzf "$tgz" -C "$tree" --strip-components=3 package/deps/librdkafka || die "cannot unpack $tgz"
  grep -q "define RD_KAFKA_VERSION  *$LIBRDKAFKA_HEX" "$tree/src/rdkafka.h" \
    || die "$LIBRDKAFKA_NPM does not bundle librdkafka $LIBRDKAFKA_VERSION"
  say "building librdkafka $LIBRDKAFKA_VERSION (${LIBRDKAFKA_FLAGS[*]}; nice; logs in $tree)"
  t0=$(date +%s)
  (cd "$tree" && nice -n 10 ./configure --prefix="$prefix" "${LIBRDKAFKA_FLAGS[@]}" > pyprod-configure.log 2>&1) \
    || { tail -30 "$tree/pyprod-configure.log" >&2; die "librdkafka configure failed ($tree/pyprod-configure.log)"; }
  (cd "$tree/src" && nice -n 10 make -j"${jobs:-2}" > ../make.log 2>&1 && make install > ../install.log 2>&1) \
    || { tail -30 "$tree/make.log" "$tree/install.log" >&2 2>/dev/null; die "librdkafka make failed (logs in $tree)"; }
  { echo "$want"; echo "built in $(( $(date +%s) - t0 ))s, jobs=${jobs:-2}"; } > "$prefix/.pyprod-build"
  say "librdkafka $LIBRDKAFKA_VERSION installed in $prefix ($(sed -n 2p "$prefix/.pyprod-build"))"
  exec {lockfd}>&-
}

# confluent_kafka_313t VPY: confluent-kafka (newest 2.15) in the venv, built from its source
# package against librdkafka 2.15.1; prints its requirement ("confluent-kafka==X")
confluent_kafka_313t() {
  local vpy=$1 prefix=$cache/librdkafka-$LIBRDKAFKA_VERSION have
  librdkafka_build "$prefix" >&2 || return 1
  have=$(PYTHON_GIL=0 "${run[@]}" "$vpy" -c 'import confluent_kafka as c, importlib.metadata as m
print(m.version("confluent-kafka"), "0x%08x" % c.libversion()[1])' 2>/dev/null || true)
  if [[ "$have" != "2.15."*" $LIBRDKAFKA_HEX" ]]; then
    say "building $CONFLUENT_KAFKA_SPEC from source against librdkafka $LIBRDKAFKA_VERSION" >&2
    C_INCLUDE_PATH=$prefix/include LIBRARY_PATH=$prefix/lib LDFLAGS="-Wl,-rpath,$prefix/lib" \
      nice -n 10 "${run[@]}" "$vpy" -m pip install -q --no-cache-dir --no-binary confluent-kafka \
      "$CONFLUENT_KAFKA_SPEC" > "${vpy%/bin/python}/.pip-confluent-kafka-build.log" 2>&1 \
      || die "the confluent-kafka build failed: ${vpy%/bin/python}/.pip-confluent-kafka-build.log"
    have=$(PYTHON_GIL=0 "${run[@]}" "$vpy" -c 'import confluent_kafka as c, importlib.metadata as m
print(m.version("confluent-kafka"), "0x%08x" % c.libversion()[1])')
    [[ "$have" == *" $LIBRDKAFKA_HEX" ]] || die "confluent-kafka loads librdkafka ${have#* }, not $LIBRDKAFKA_HEX"
  fi
  echo "confluent-kafka==${have%% *}"
}
