#!/usr/bin/env bash
# The whole test suite from scratch: install dependencies, configure a fresh
# build directory, build, run every test (unit, multi-rank, Loom).
# Usage: bash scripts/test.sh [BUILD_DIR]   (default: build-test)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
dir=${1:-build-test}
rm -rf "$dir"
meson setup "$dir" --buildtype=release
ninja -C "$dir" -j"$(nproc)"
# The engine under ThreadSanitizer first, so that meson's summary closes the log.
bash scripts/tsan.sh "$dir-tsan"
# Multi-rank tests are marked is_parallel: false; unit tests run two at a time.
meson test -C "$dir" --print-errorlogs --num-processes 2
