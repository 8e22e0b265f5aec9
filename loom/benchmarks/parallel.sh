#!/bin/bash
# parallel.sh - the measurements of doc/loom_parallel.md: images/s of
# data-parallel ResNet-20 on 1 and 2 ranks, bucketed-overlapped against
# blocking-after-backward gradient reduction, the mesh model on 1 and 2
# spatial ranks, and (MEMORY=1) the memory per rank of the full 1024x1024
# mesh model on 1, 2 and 4 spatial ranks.
#
#   loom/benchmarks/parallel.sh BUILD_DIR [REPEAT]
#
# Each case runs REPEAT times (default 3), the cases interleaved, and the
# table gives each case's best images/s with its comm_wait_share (the
# machine may be shared: the 1-minute load average is printed with it).
set -u
BUILD=${1:?usage: parallel.sh BUILD_DIR [REPEAT]}
REPEAT=${2:-3}
LOOM=$BUILD/loom/loom
[ -x "$LOOM" ] || { echo "no $LOOM: build first (ninja -C $BUILD)" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1
RES="train --model resnet20 --batch 32 --steps 40 --interval 40 --limit-test 1000 --epochs 1 --threads 1"
MESH="train --model mesh --batch 4 --train-samples 48 --test-samples 8 --interval 12 --epochs 1 --threads 1 --lr 0.05"
cases=(
  "resnet20 dp1 overlap|1|$RES --data-parallel 1"
  "resnet20 dp2 overlap 25MiB|2|$RES --data-parallel 2"
  "resnet20 dp2 overlap 0.25MiB|2|$RES --data-parallel 2 --bucket-mb 0.25"
  "resnet20 dp2 blocking|2|$RES --data-parallel 2 --dp-mode blocking"
  "mesh128 1 rank|1|$MESH --spatial 1x1"
  "mesh128 spatial 2x1|2|$MESH --spatial 2x1"
  "mesh128 spatial 1x2|2|$MESH --spatial 1x2"
)
declare -A best wait
for ((r = 0; r < REPEAT; r++)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name np args <<<"$c"
    line=$(mpiexec -n "$np" "$LOOM" $args 2>&1 | grep '^final:')
    ips=$(sed -n 's/.*images_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
    cw=$(sed -n 's/.*comm_wait_share=\([0-9.]*\).*/\1/p' <<<"$line")
    [ -n "$ips" ] || { echo "# $name failed" >&2; continue; }
    if [ -z "${best[$name]:-}" ] || awk "BEGIN{exit !($ips > ${best[$name]})}"; then
      best[$name]=$ips
      wait[$name]=$cw
    fi
  done
done
echo "# $(uname -n), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), best of $REPEAT"
printf '%-30s %6s %12s %16s\n' "# case" "ranks" "images/s" "comm_wait_share"
for c in "${cases[@]}"; do
  IFS='|' read -r name np args <<<"$c"
  printf '%-30s %6s %12s %16s\n' "$name" "$np" "${best[$name]:-failed}" "${wait[$name]:--}"
done
if [ -n "${best[resnet20 dp1 overlap]:-}" ] && [ -n "${best[resnet20 dp2 overlap 25MiB]:-}" ]; then
  awk -v a="${best[resnet20 dp1 overlap]}" -v b="${best[resnet20 dp2 overlap 25MiB]}" \
    'BEGIN{printf "# resnet20 data-parallel scaling efficiency 1 -> 2 ranks: %.0f%%\n", 100*b/(2*a)}'
fi
if [ -n "${best[mesh128 1 rank]:-}" ] && [ -n "${best[mesh128 spatial 2x1]:-}" ]; then
  awk -v a="${best[mesh128 1 rank]}" -v b="${best[mesh128 spatial 2x1]}" -v c="${best[mesh128 spatial 1x2]:-0}" \
    'BEGIN{printf "# mesh spatial speed-up 1 -> 2 ranks: 2x1 %.2fx, 1x2 %.2fx\n", b/a, c/a}'
fi
if [ "${MEMORY:-0}" = 1 ]; then
  for g in "1 1x1" "2 2x1" "4 2x2"; do
    set -- $g
    mpiexec -n "$1" "$LOOM" train --model mesh --mesh-size 1024 --width 1 --batch 1 --spatial "$2" \
      --memory-probe 2>&1 | grep -E '^(#|memory:| +0 )'
  done
fi
