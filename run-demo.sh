#!/usr/bin/env bash
# The main job on a fresh machine: install what the demo needs and is missing (a JDK and Maven,
# .venv with pyprod built from source and its `demo` extra: the readers; not Kerberos nor the
# test extras, which run-tests.sh adds), start a local Kafka broker, publish through pyprod,
# print the throughput, read everything back with an independent client and check it. Options
# go to `python examples/demo.py` (e.g. --records 200000; --help lists them).
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh demo
echo "run-demo: python examples/demo.py${*:+ $*}"
python examples/demo.py "$@"
