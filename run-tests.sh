#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (a JDK, Maven and Kerberos if
# missing, .venv with pyprod built from source and its `test` extra, added to a .venv that
# run-demo.sh made, the Kafka jars via Maven), then runs every test on the compiled kcore, then
# the kernels, fuzz targets, network client, a round trip and the transactions again on the pure
# twins, then the kernel and producer unit tests and the concurrency stress rounds on kcore built
# with ASan and UBSan (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh test
echo "run-tests: python -m pytest${*:+ $*} (compiled kcore)"
python -m pytest "$@"
echo "run-tests: kernels, fuzz, network, a round trip, transactions and asyncio with PYPROD_NO_EXTENSIONS=1 (the pure twins)"
PYPROD_NO_EXTENSIONS=1 python -m pytest -q -p no:cacheprovider tests/kernels tests/fuzz \
  tests/network tests/integration/test_producer_roundtrip.py tests/integration/test_transactions.py \
  tests/aio
bash scripts/sanitize.sh  # says each step itself (sanitize: ...)
