#!/bin/sh
# test_par_cli.sh MPIEXEC LOOM - the parallel `loom train` end to end:
# mismatched layouts are refused with exit status 2 and a message; the mesh
# model split over 2 spatial ranks (1x2 overlap, 2x1 blocking) prints the
# same losses and test metrics as one process (within 1e-3); ResNet data parallel prints
# the final line with comm_wait_share and the bucket/algorithm summary;
# mesh samples written to a file (--mesh-write) train like generated ones.
# `loom dp-step` (device-style compute, overlap against blocking) prints its
# table, final line and CSV on 2 ranks and on 1 (hidden_pct n/a there), and
# refuses bad options with status 2 and a message; so does train for a value
# that is not a finite number.
set -u
MPIEXEC=$1
LOOM=$2
fails=0
pass=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$MPIEXEC" -n 2 "$LOOM" train --model mesh --data-parallel 2 --spatial 2x1 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'D\*H\*W' "$tmp/e"; then ok; else bad "P != D*H*W: rc $rc, $(cat "$tmp/e")"; fi

"$MPIEXEC" -n 2 "$LOOM" train --model resnet8 --spatial 2x1 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'mesh model only' "$tmp/e"; then ok; else bad "resnet --spatial: rc $rc"; fi

M="--model mesh --mesh-size 32 --train-samples 8 --test-samples 4 --batch 2 --interval 1 --seed 3"
# strip the timing fields: the rest must be identical
strip() { grep -E '^(epoch|final)' "$1" | sed -e 's/ img\/s.*//' -e 's/ (eval.*//' -e 's/ images_per_s=.*//'; }
"$MPIEXEC" -n 1 "$LOOM" train $M >"$tmp/one" 2>&1 || bad "mesh on 1 rank failed: $(tail -3 "$tmp/one")"
"$MPIEXEC" -n 2 "$LOOM" train $M --spatial 1x2 >"$tmp/s12" 2>&1 || bad "mesh 1x2 failed: $(tail -3 "$tmp/s12")"
"$MPIEXEC" -n 2 "$LOOM" train $M --spatial 2x1 --dp-mode blocking >"$tmp/s21" 2>&1 || bad "mesh 2x1 failed"
strip "$tmp/one" >"$tmp/one.s"
strip "$tmp/s12" >"$tmp/s12.s"
strip "$tmp/s21" >"$tmp/s21.s"
# same numbers within 1e-3 (a cell whose logit is ~0 may flip a prediction)
same() {
    tr -cs '0-9.e-' '\n' <"$1" | grep -E '[0-9]' >"$1.n"
    tr -cs '0-9.e-' '\n' <"$2" | grep -E '[0-9]' >"$2.n"
    [ -s "$1.n" ] && [ "$(wc -l <"$1.n")" -eq "$(wc -l <"$2.n")" ] &&
        paste "$1.n" "$2.n" | awk '{d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2;
            if (m < 1) m = 1; if (d > 1e-3 * m) bad = 1} END {exit bad}'
}
if same "$tmp/one.s" "$tmp/s12.s"; then ok; else bad "1x2 differs from 1 rank: $(diff "$tmp/one.s" "$tmp/s12.s")"; fi
if same "$tmp/one.s" "$tmp/s21.s"; then ok; else bad "2x1 differs from 1 rank: $(diff "$tmp/one.s" "$tmp/s21.s")"; fi
if grep -Eq '^final: pixel_precision=[0-9.]+ pixel_recall=[0-9.]+ test_loss=[0-9.]+ images_per_s=[0-9.]+ comm_wait_share=[0-9.]+$' "$tmp/s12"; then ok; else bad "mesh final line: $(grep final "$tmp/s12")"; fi

# samples written to a file and read back train exactly as generated ones
# (the same training indices 0..7; the test set differs, so compare steps only)
"$MPIEXEC" -n 2 "$LOOM" train $M --test-samples 4 --mesh-write "$tmp/m.bin" >"$tmp/w" 2>&1 || bad "mesh-write failed: $(cat "$tmp/w")"
"$MPIEXEC" -n 2 "$LOOM" train $M --spatial 2x1 --mesh-file "$tmp/m.bin" >"$tmp/f" 2>&1 || bad "mesh-file run failed: $(tail -3 "$tmp/f")"
grep '^epoch .* step' "$tmp/one.s" >"$tmp/one.t"
strip "$tmp/f" | grep '^epoch .* step' >"$tmp/f.t"
if same "$tmp/one.t" "$tmp/f.t"; then ok; else bad "training from the file differs: $(diff "$tmp/one.t" "$tmp/f.t")"; fi
"$MPIEXEC" -n 1 "$LOOM" train --model mesh --mesh-size 64 --mesh-file "$tmp/m.bin" >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'holds 12 samples of 32x32' "$tmp/e"; then ok; else bad "mesh-file size mismatch: rc $rc $(cat "$tmp/e")"; fi

"$MPIEXEC" -n 2 "$LOOM" train --model resnet8 --synthetic --data-parallel 2 --batch 4 --image 16 --steps 3 --bucket-mb 0.05 >"$tmp/r" 2>&1 || bad "resnet dp failed: $(tail -3 "$tmp/r")"
if grep -Eq '^final: test_accuracy=[0-9.]+ test_loss=[0-9.]+ images_per_s=[0-9.]+ comm_wait_share=[0-9.]+$' "$tmp/r"; then ok; else bad "resnet final line"; fi
if grep -Eq '^#   bucket [0-9]+: .* -> [a-z_]+$' "$tmp/r" && [ "$(grep -c '^#   bucket' "$tmp/r")" -gt 1 ]; then ok; else bad "bucket/algorithm summary missing"; fi

D="dp-step --batch 4 --steps 3 --warmup 1 --calib 2 --bucket-mb 0.1"
"$MPIEXEC" -n 2 "$LOOM" $D --speedup 1,4 --csv "$tmp/d.csv" >"$tmp/d" 2>&1 || bad "dp-step failed: $(tail -3 "$tmp/d")"
if grep -Eq '^ +speedup +compute_ms +blocking_ms +overlap_ms +overlap/blocking +hidden_pct$' "$tmp/d" &&
    [ "$(grep -Ec '^ +(1|4) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +-?[0-9.]+$' "$tmp/d")" -eq 2 ]; then ok
else bad "dp-step table: $(cat "$tmp/d")"; fi
F='^final: speedup=1 compute_ms=[0-9.]+ blocking_ms=[0-9.]+ overlap_ms=[0-9.]+ overlap_over_blocking=[0-9.]+'
if grep -Eq "$F"' hidden_pct=-?[0-9.]+ pure_comm_ms=[0-9.]+$' "$tmp/d"; then ok; else bad "dp-step final line: $(grep final "$tmp/d")"; fi
if grep -Eq '^#.*device-style compute' "$tmp/d" && grep -Eq '^# bucket plan: .* -> buckets: [0-9]+$' "$tmp/d"; then ok
else bad "dp-step header"; fi
if head -1 "$tmp/d.csv" | grep -q '^model,ranks,.*,speedup,compute_ms,blocking_ms,overlap_ms,' &&
    [ "$(grep -c '^resnet20,2,4,' "$tmp/d.csv")" -eq 2 ]; then ok; else bad "dp-step csv: $(cat "$tmp/d.csv")"; fi
"$MPIEXEC" -n 1 "$LOOM" $D --steps 2 >"$tmp/d1" 2>&1 || bad "dp-step on 1 rank failed: $(tail -3 "$tmp/d1")"
if grep -Eq "$F"' hidden_pct=n/a pure_comm_ms=[0-9.]+$' "$tmp/d1"; then ok; else bad "dp-step 1 rank final: $(grep final "$tmp/d1")"; fi
"$MPIEXEC" -n 2 "$LOOM" dp-step --speedup 1,0 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'speedup wants positive numbers' "$tmp/e"; then ok; else bad "dp-step --speedup 1,0: rc $rc $(cat "$tmp/e")"; fi
"$MPIEXEC" -n 2 "$LOOM" dp-step --steps 3 --bogus 1 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'unknown option --bogus' "$tmp/e"; then ok; else bad "dp-step --bogus: rc $rc $(cat "$tmp/e")"; fi
# not finite: refused (an infinite bucket size became an out-of-range size_t)
for opt in "--lr nan" "--bucket-mb inf"; do
    "$MPIEXEC" -n 1 "$LOOM" train --model mesh $opt >"$tmp/o" 2>"$tmp/e"
    rc=$?
    if [ $rc -eq 2 ] && grep -q 'needs a finite number' "$tmp/e"; then ok; else bad "train $opt: rc $rc $(cat "$tmp/e")"; fi
done

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
