#!/usr/bin/env bash
# run_allreduce.sh BUILD_DIR OUT_DIR - run Weft's allreduce benchmarks.
#
# Runs, from BUILD_DIR/benchmarks, on 2 ranks:
#   weft_osu_allreduce   (4 B .. 16 MiB)            -> OUT_DIR/osu_allreduce_n2.{csv,txt}
#   weft_osu_iallreduce  --compute=busy and device  -> OUT_DIR/osu_iallreduce_{busy,device}_n2.{csv,txt}
#   weft_sweep_allreduce                            -> OUT_DIR/sweep_allreduce_n2.{csv,txt}
# and the small-message latency case (4 B .. 4 KiB) on 4 ranks:
#   weft_osu_allreduce -m 4:4096                    -> OUT_DIR/osu_allreduce_small_n4.{csv,txt}
#
# Environment: MPIEXEC (default mpiexec), EXTRA_ARGS (added to every program,
# e.g. "-r 7"). WEFT_* variables pass through to the programs.
set -euo pipefail

usage() {
    echo "Usage: $0 BUILD_DIR OUT_DIR" >&2
    echo "  BUILD_DIR: a meson build directory with benchmarks/ built" >&2
    echo "  OUT_DIR:   where the CSV and text outputs go (created if missing)" >&2
}

if [ "$#" -eq 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; }; then
    usage
    exit 0
fi
if [ "$#" -ne 2 ]; then
    usage
    exit 2
fi

build=$1
out=$2
bindir=$build/benchmarks
mpiexec=${MPIEXEC:-mpiexec}
read -r -a extra <<<"${EXTRA_ARGS:-}"

for prog in weft_osu_allreduce weft_osu_iallreduce weft_sweep_allreduce; do
    if [ ! -x "$bindir/$prog" ]; then
        echo "$0: error: $bindir/$prog not found or not executable (build it first)" >&2
        exit 2
    fi
done
if ! command -v "$mpiexec" >/dev/null 2>&1; then
    echo "$0: error: '$mpiexec' not found (set MPIEXEC)" >&2
    exit 2
fi
mkdir -p "$out"

failed=0
# run NAME NRANKS PROG ARGS...: text to OUT_DIR/NAME.txt, CSV to OUT_DIR/NAME.csv
run() {
    local name=$1 n=$2 prog=$3
    shift 3
    echo "== $name: $mpiexec -n $n $prog $* --csv $out/$name.csv" >&2
    local t0=$SECONDS
    if ! "$mpiexec" -n "$n" "$bindir/$prog" "$@" ${extra[@]+"${extra[@]}"} \
        --csv "$out/$name.csv" >"$out/$name.txt"; then
        echo "$0: $name FAILED (see $out/$name.txt)" >&2
        failed=1
    fi
    echo "   $name took $((SECONDS - t0)) s" >&2
}

{
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# host: $(uname -n) $(uname -m), $(nproc) cores"
    echo "# mpiexec: $(command -v "$mpiexec")"
    env | grep '^WEFT_' | sed 's/^/# env: /' || true
} >"$out/environment.txt"

run osu_allreduce_n2 2 weft_osu_allreduce -m 4:16777216
run osu_iallreduce_busy_n2 2 weft_osu_iallreduce -m 4:16777216 --compute=busy
run osu_iallreduce_device_n2 2 weft_osu_iallreduce -m 4:16777216 --compute=device
run sweep_allreduce_n2 2 weft_sweep_allreduce -m 4:16777216
run osu_allreduce_small_n4 4 weft_osu_allreduce -m 4:4096

if [ "$failed" -ne 0 ]; then
    echo "$0: some runs failed" >&2
    exit 1
fi
echo "results in $out" >&2
