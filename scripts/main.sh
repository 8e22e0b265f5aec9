#!/usr/bin/env bash
# The main job: install dependencies, build, then
#  1. train Loom's mesh-tangling model on 4 local ranks (2 sample groups x
#     2 spatial ranks) for a short run: loss, images/s, the share of time spent
#     waiting on communication, and which allreduce algorithm served which
#     gradient bucket;
#  2. run Weft's allreduce benchmark (Weft against MPI_Allreduce in the same
#     run) on 2 local ranks, 4 B to 16 MiB.
# Usage: bash scripts/main.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
dir=${1:-build}
[ -f "$dir/build.ninja" ] || meson setup "$dir" --buildtype=release
ninja -C "$dir" -j"$(nproc)"
echo "== Loom: mesh model, 4 ranks (data-parallel 2 x spatial 2x1)"
mpiexec -n 4 "$dir/loom/loom" train --model mesh --data-parallel 2 --spatial 2x1 \
  --batch 4 --train-samples 128 --test-samples 32 --epochs 3 --lr 0.1 --interval 8 \
  --bucket-mb 0.05
echo "== Weft: allreduce latency against MPI_Allreduce, 2 ranks"
mpiexec -n 2 "$dir/benchmarks/weft_osu_allreduce" -m 4:16777216
