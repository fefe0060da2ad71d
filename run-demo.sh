#!/usr/bin/env bash
# The main job on a fresh machine: build, then run it (see README).
set -euo pipefail
cd "$(dirname "$0")"
. scripts/setup.sh
python -m pytest bench/ --benchmark-enable --benchmark-columns=mean,ops,rounds -q "$@"
