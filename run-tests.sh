#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (Python deps into .venv, a JDK
# and Maven if missing, the Kafka jars via Maven), builds the extensions, runs every test.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
python -m pytest "$@"
# The loader path without extensions: the pure-Python twins alone.
PYPROD_NO_EXTENSIONS=1 python -m pytest -q -p no:cacheprovider tests/kernels
