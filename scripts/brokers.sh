#!/usr/bin/env bash
# The broker matrix (issue 43): tests/brokers on one broker of each Apache Kafka version in
# tests/harness/broker_matrix.py (4.4.0 down to 0.11.0.3), one after another, niced; CI runs only
# the newest and the oldest (the default of PYPROD_BROKER_VERSIONS). docs/brokers.md says more.
#   scripts/brokers.sh                 every version
#   scripts/brokers.sh 2.8.2 3.0.2     those only (the others keep their last results)
# Per version: .cache/brokers/<version>.log (pytest's output), .xml (JUnit) and .meta (commit,
# date). Then writes docs/results/brokers.md (check x version) from every version's last run and
# prints it. Exit status: 1 if any check failed in this run.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && . .venv/bin/activate
out=.cache/brokers
mkdir -p "$out"
if [ $# -gt 0 ]; then
  versions=("$@")
else
  read -r -a versions < <(python -c "from tests.harness.broker_matrix import VERSIONS
print(' '.join(v.version for v in VERSIONS))")
fi
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -- src tests setup.py)" ] || commit="$commit+local"
status=0
for v in "${versions[@]}"; do
  echo "brokers: $v"
  start=$(date +%s)
  PYPROD_BROKER_VERSIONS="$v" nice -n 10 python -m pytest -q -p no:cacheprovider tests/brokers \
    --junitxml="$out/$v.xml" >"$out/$v.log" 2>&1 || status=1
  echo "$commit, $(date -u +%Y-%m-%d), $(( $(date +%s) - start ))s" >"$out/$v.meta"
  tail -n 1 "$out/$v.log"
done
python -m tests.harness.broker_report "$out" docs/results/brokers.md
exit $status
