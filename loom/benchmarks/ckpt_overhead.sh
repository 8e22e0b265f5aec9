#!/bin/sh
# ckpt_overhead.sh [LOOM] - what checkpointing costs a training step: the same
# run (ResNet-20, synthetic data, batch 32, STEPS steps, 2 threads) without
# checkpoints, with the background writer (default) and with the blocking
# writer (--ckpt-sync), a checkpoint every EVERY steps, REPEAT times
# interleaved.  Prints images/s of the training steps, the time the training
# thread was held per checkpoint and the writer's time per checkpoint.
# Environment: STEPS (40), EVERY (1), REPEAT (3), DIR (a temporary directory).
LOOM=${1:-build/loom/loom}
STEPS=${STEPS:-40}
EVERY=${EVERY:-1}
REPEAT=${REPEAT:-3}
DIR=${DIR:-$(mktemp -d)}
O="--model resnet20 --synthetic --batch 32 --limit-train $((32 * STEPS)) --epochs 1 --threads 2 --interval 100000"
echo "# ckpt_overhead: $O, a checkpoint every $EVERY steps in $DIR; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-6s %-6s %12s %16s %16s\n' run mode images_per_s held_ms_per_ckpt writer_ms_per_ckpt
for r in $(seq 1 "$REPEAT"); do
    for mode in none async sync; do
        rm -rf "$DIR/ck"
        case $mode in
        none) extra= ;;
        async) extra="--ckpt-dir $DIR/ck --ckpt-every $EVERY" ;;
        sync) extra="--ckpt-dir $DIR/ck --ckpt-every $EVERY --ckpt-sync" ;;
        esac
        out=$("$LOOM" train $O $extra 2>&1) || { echo "$out" >&2; exit 1; }
        ips=$(echo "$out" | sed -n 's/^final: .*images_per_s=\([0-9.]*\).*/\1/p')
        held=$(echo "$out" | sed -n 's/.*training thread held \([0-9.]*\) ms.*/\1/p')
        wr=$(echo "$out" | sed -n 's/.*writer \([0-9.]*\) ms per checkpoint.*/\1/p')
        printf '%-6s %-6s %12s %16s %16s\n' "$r" "$mode" "$ips" "${held:--}" "${wr:--}"
    done
done
rm -rf "$DIR/ck"
