#!/usr/bin/env bash
# Compiles and links every kcore extension for macOS (x86_64, arm64) and Windows (x86_64) on
# this Linux machine, with zig cc against each platform's own CPython (headers, python3XX.lib,
# libpython3.X.dylib: Maven Central's org.bytedeco:cpython jars, fetched with mvn), and checks
# every module: no compile error, no undefined symbol, each *_impl.h's platform branch built
# (scripts/cross_wheels.py says how). Nothing here runs the modules: the wheels workflow
# (.github/workflows/wheels.yml) builds and tests them on native runners.
# Usage: scripts/cross_wheels.sh [--python 3.X] [--target T]... [--wheels]
#   --python: 3.10 to 3.14 (default: python3's); --target: x86_64-macos, aarch64-macos,
#   x86_64-windows (default: all); --wheels: also pack each target's modules into a wheel.
# Tools (zig, Cython: a venv), the CPython jars' files and the modules stay in .cache/cross.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.cache/cross/tools
if ! "$T/bin/python" -c "import ziglang, Cython, setuptools, wheel" 2>/dev/null; then
  echo "cross: installing the tools (zig, Cython, setuptools) in $T"
  python3 -m venv "$T"
  "$T/bin/pip" install -q "ziglang==0.17.1" "Cython>=3.1" "setuptools>=77" wheel
fi
for tool in mvn llvm-nm llvm-objdump; do
  command -v "$tool" >/dev/null || { echo "cross: installing llvm and maven with apt-get";
    apt-get install -y -qq llvm maven >/dev/null; break; }
done
exec nice -n 10 "$T/bin/python" scripts/cross_wheels.py "$@"
