#!/usr/bin/env bash
# The whole test suite from scratch: install dependencies, configure a fresh
# build directory, build, run every test (unit, multi-rank, Loom, the Python
# package and its torch backend, sanitizers, fuzzers, the killed rank;
# doc/testing.md says what and why), and use the Python package from an
# install prefix and from a wheel (pip install .).
# Usage: bash scripts/test.sh [BUILD_DIR]   (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# numpy, pytest and torch in a cached virtual environment (scripts/python_env.sh)
py=$(bash scripts/python_env.sh | tail -n 1)
dir=${1:-build-test}
rm -rf "$dir" "$dir-prefix"
meson setup "$dir" --buildtype=release -Dpython="$py" --prefix="$PWD/$dir-prefix"
ninja -C "$dir" -j"$(nproc)"
# The sanitizer runs and the fuzzers first, so that meson's summary closes
# the log (doc/testing.md): the engine under ThreadSanitizer, the unit and a
# selection of multi-rank tests under AddressSanitizer + UBSan, each parser
# fuzzed for 20 s.
bash scripts/tsan.sh "$dir-tsan"
bash scripts/asan.sh "$dir-asan"
bash scripts/fuzz.sh "$dir-fuzz"
# The Python package from meson install's prefix (not the build tree), and
# from a wheel built by pip install . (about 15 s).
bash scripts/python_install_check.sh "$dir" "$py"
bash scripts/python_wheel_check.sh "$py"
# Multi-rank tests are marked is_parallel: false; unit tests run two at a time.
meson test -C "$dir" --print-errorlogs --num-processes 2
