#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (a JDK, Maven and Kerberos if
# missing, .venv with pyprod built from source and its test extras, the Kafka jars via Maven),
# then runs every test on the compiled kcore, then the kernels again on the pure twins, then the
# kernel and producer unit tests on kcore built with ASan and UBSan (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
echo "run-tests: python -m pytest${*:+ $*} (compiled kcore)"
python -m pytest "$@"
echo "run-tests: tests/kernels and tests/fuzz with PYPROD_NO_EXTENSIONS=1 (the pure-Python twins)"
PYPROD_NO_EXTENSIONS=1 python -m pytest -q -p no:cacheprovider tests/kernels tests/fuzz
bash scripts/sanitize.sh  # says each step itself (sanitize: ...)
