# Sourced by run-tests.sh and run-demo.sh: a venv with pyprod built from source plus test deps.
need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip "setuptools>=77" "Cython>=3"  # also for direct setup.py builds
python -m pip install -q -e ".[test]"   # compiles kcore: a failed compile stops here
