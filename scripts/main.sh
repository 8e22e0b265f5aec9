#!/usr/bin/env bash
# The main job: install dependencies, build, and run the allreduce benchmark
# (Weft against MPI_Allreduce in the same run) on 2 local ranks.
# Usage: bash scripts/main.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
dir=${1:-build}
[ -f "$dir/build.ninja" ] || meson setup "$dir" --buildtype=release
ninja -C "$dir" -j"$(nproc)"
mpiexec -n 2 "$dir/benchmarks/weft_osu_allreduce" -m 4:16777216
