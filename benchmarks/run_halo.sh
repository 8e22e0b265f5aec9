#!/usr/bin/env bash
# run_halo.sh BUILD_DIR OUT_DIR [REPEATS] - the halo acceptance matrix.
#
# Runs BUILD_DIR/benchmarks/weft_osu_halo (blocks 64x64 .. 1024x1024 float32,
# 16 channels, widths 1 and 2, faces+edges+corners, non-periodic) on
#   2 ranks, grid 2x1 and 1x2     -> OUT_DIR/halo_n2_2x1_R.{csv,txt}, halo_n2_1x2_R...
#   4 ranks, grid 2x2             -> OUT_DIR/halo_n4_2x2_R.{csv,txt}
# REPEATS times each (default 3, R = 1..REPEATS), then prints per
# (grid, block, width) the median over the repeats of the Weft/MPI ratio of
# medians and of the ratio of fastest rounds.
#
# Environment: MPIEXEC (default mpiexec), EXTRA_ARGS (default "-i 620 -x 40 -r 31").
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
    echo "Usage: $0 BUILD_DIR OUT_DIR [REPEATS]" >&2
    exit 2
fi
build=$1
out=$2
reps=${3:-3}
mpiexec=${MPIEXEC:-mpiexec}
extra=${EXTRA_ARGS:--i 620 -x 40 -r 31}
exe=$build/benchmarks/weft_osu_halo
[ -x "$exe" ] || { echo "error: $exe not built" >&2; exit 1; }
mkdir -p "$out"

for r in $(seq 1 "$reps"); do
    for cfg in "2 2x1" "2 1x2" "4 2x2"; do
        set -- $cfg
        base=$out/halo_n$1_$2_$r
        # shellcheck disable=SC2086
        "$mpiexec" -n "$1" "$exe" --grid "$2" --channels 16 --width 1,2 \
            --block 64,128,256,512,1024 $extra --quiet --csv "$base.csv" > "$base.txt"
    done
done

# Summary: median over repeats of the ratio of medians (CSV) and of the ratio
# of the fastest rounds (text output, column 8).
python3 - "$out" "$reps" <<'PY'
import csv, statistics, sys, glob, os
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for cfg in ("n2_2x1", "n2_1x2", "n4_2x2"):
    for r in range(1, reps + 1):
        base = os.path.join(out, f"halo_{cfg}_{r}")
        with open(base + ".csv") as f:
            for row in csv.DictReader(l for l in f if not l.startswith("#")):
                rows.setdefault((cfg, row["block"], row["width"]), {"med": [], "min": [], "w": [], "m": []})
                e = rows[(cfg, row["block"], row["width"])]
                e["med"].append(float(row["ratio"]))
                e["w"].append(float(row["weft_us"]))
                e["m"].append(float(row["mpi_us"]))
        with open(base + ".txt") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                t = line.split()
                rows[(cfg, t[0], t[1])]["min"].append(float(t[7]))
print("| ranks, grid | block | width | Weft us | MPI us | Weft/MPI (median of medians) | Weft/MPI (fastest rounds) |")
print("|---|---|---|---|---|---|---|")
for (cfg, blk, w), e in rows.items():
    print(f"| {cfg.replace('_', ', ')} | {blk} | {w} | {statistics.median(e['w']):.1f} | "
          f"{statistics.median(e['m']):.1f} | {statistics.median(e['med']):.2f} | {statistics.median(e['min']):.2f} |")
PY
