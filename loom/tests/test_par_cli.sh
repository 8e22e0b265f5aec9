#!/bin/sh
# test_par_cli.sh MPIEXEC LOOM - the parallel `loom train` end to end:
# mismatched layouts are refused with exit status 2 and a message; the mesh
# model split over 2 spatial ranks (1x2 overlap, 2x1 blocking) prints the
# same losses and test metrics as one process (within 1e-3); ResNet data parallel prints
# the final line with comm_wait_share and the bucket/algorithm summary;
# mesh samples written to a file (--mesh-write) train like generated ones.
# The same command line on one rank and on two: `mpiexec -n 2 loom train` is
# data parallel by default and only rank 0 prints (one final line); a bad
# option is reported once and exits 2; `loom bench` prints Horovod-style
# per-rank and total lines.  The benchmark program loom_dp_step
# (device-style compute, overlap against blocking) prints its table, final
# line and CSV on 2 ranks and on 1 (hidden_pct n/a there), and refuses bad
# options with status 2 and a message.
set -u
MPIEXEC=$1
LOOM=$2
DPSTEP=$3
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

M="--model mesh --mesh-size 32 --train-samples 8 --test-samples 4 --batch 2 --interval 1 --seed 3 --epochs 1 --lr 0.05 --threads 1"
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

D="--batch 4 --steps 3 --warmup 1 --calib 2 --bucket-mb 0.1"
"$MPIEXEC" -n 2 "$DPSTEP" $D --speedup 1,4 --csv "$tmp/d.csv" >"$tmp/d" 2>&1 || bad "dp-step failed: $(tail -3 "$tmp/d")"
if grep -Eq '^ +speedup +compute_ms +blocking_ms +overlap_ms +overlap/blocking +hidden_pct$' "$tmp/d" &&
    [ "$(grep -Ec '^ +(1|4) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +-?[0-9.]+$' "$tmp/d")" -eq 2 ]; then ok
else bad "dp-step table: $(cat "$tmp/d")"; fi
F='^final: speedup=1 compute_ms=[0-9.]+ blocking_ms=[0-9.]+ overlap_ms=[0-9.]+ overlap_over_blocking=[0-9.]+'
if grep -Eq "$F"' hidden_pct=-?[0-9.]+ pure_comm_ms=[0-9.]+$' "$tmp/d"; then ok; else bad "dp-step final line: $(grep final "$tmp/d")"; fi
if grep -Eq '^#.*device-style compute' "$tmp/d" && grep -Eq '^# bucket plan: .* -> buckets: [0-9]+$' "$tmp/d"; then ok
else bad "dp-step header"; fi
if head -1 "$tmp/d.csv" | grep -q '^model,ranks,.*,speedup,compute_ms,blocking_ms,overlap_ms,' &&
    [ "$(grep -c '^resnet20,2,4,' "$tmp/d.csv")" -eq 2 ]; then ok; else bad "dp-step csv: $(cat "$tmp/d.csv")"; fi
"$MPIEXEC" -n 1 "$DPSTEP" $D --steps 2 >"$tmp/d1" 2>&1 || bad "dp-step on 1 rank failed: $(tail -3 "$tmp/d1")"
if grep -Eq "$F"' hidden_pct=n/a pure_comm_ms=[0-9.]+$' "$tmp/d1"; then ok; else bad "dp-step 1 rank final: $(grep final "$tmp/d1")"; fi
"$MPIEXEC" -n 2 "$DPSTEP" --speedup 1,0 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q -- '--speedup wants positive numbers' "$tmp/e"; then ok; else bad "dp-step --speedup 1,0: rc $rc $(cat "$tmp/e")"; fi
"$MPIEXEC" -n 2 "$DPSTEP" --steps 3 --bogus 1 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q "unknown option '--bogus'" "$tmp/e"; then ok; else bad "dp-step --bogus: rc $rc $(cat "$tmp/e")"; fi
# not finite: refused, naming the option
for opt in "--lr nan" "--bucket-mb inf"; do
    "$MPIEXEC" -n 2 "$LOOM" train --model mesh $opt >"$tmp/o" 2>"$tmp/e"
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "${opt%% *} needs a number" "$tmp/e" && [ "$(grep -c 'needs a number' "$tmp/e")" -eq 1 ]
    then ok; else bad "train $opt: rc $rc $(cat "$tmp/e")"; fi
done
"$MPIEXEC" -n 2 "$DPSTEP" --help >"$tmp/o" 2>&1 && grep -q 'loom_dp_step' "$tmp/o" && ok || bad "loom_dp_step --help"

# one command line for one rank and for many: data parallel by default,
# rank 0 alone prints and writes the files
R="--model resnet8 --synthetic --batch 4 --image 12 --steps 3 --epochs 2 --interval 1 --threads 1"
"$MPIEXEC" -n 1 "$LOOM" train $R --metrics "$tmp/m1.csv" --save "$tmp/w1" >"$tmp/r1" 2>&1 || bad "resnet 1 rank: $(tail -3 "$tmp/r1")"
"$MPIEXEC" -n 2 "$LOOM" train $R --metrics "$tmp/m2.csv" --save "$tmp/w2" >"$tmp/r2" 2>&1 || bad "resnet 2 ranks: $(tail -3 "$tmp/r2")"
for f in r1 r2; do
    if [ "$(grep -c '^final: test_accuracy=' "$tmp/$f")" -eq 1 ] && [ "$(grep -c '^epoch 2/2 test_loss' "$tmp/$f")" -eq 1 ]
    then ok; else bad "$f: one final line and one test line per epoch expected: $(cat "$tmp/$f")"; fi
done
if grep -q '^# loom train: .* 2 ranks = 2 sample groups x spatial 1x1; batch 4 per group (8 global)' "$tmp/r2"; then ok
else bad "mpiexec -n 2 loom train is not data parallel by default: $(head -2 "$tmp/r2")"; fi
if [ "$(grep -c '^train,' "$tmp/m2.csv")" -eq "$(grep -c '^train,' "$tmp/m1.csv")" ] && [ -s "$tmp/w2" ]; then ok
else bad "metrics/save of the 2-rank run"; fi
"$MPIEXEC" -n 2 "$LOOM" train $R --bogus >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c "unknown option '--bogus'" "$tmp/e")" -eq 1 ]; then ok; else bad "2 ranks --bogus: rc $rc $(cat "$tmp/e")"; fi
"$MPIEXEC" -n 2 "$LOOM" train $R --data-parallel 3 >"$tmp/o" 2>"$tmp/e"
rc=$?
if [ $rc -eq 2 ] && grep -q 'D\*H\*W' "$tmp/e"; then ok; else bad "2 ranks --data-parallel 3: rc $rc $(cat "$tmp/e")"; fi
"$MPIEXEC" -n 2 "$LOOM" train --help >"$tmp/o" 2>&1
if [ "$(grep -c '^Usage: ' "$tmp/o")" -eq 1 ]; then ok; else bad "help printed $(grep -c '^Usage: ' "$tmp/o") times"; fi
"$MPIEXEC" -n 2 "$LOOM" bench --model resnet8 --synthetic --batch 4 --image 12 --channels 1 --classes 10 --iters 3 --warmup 1 --threads 1 >"$tmp/b" 2>&1 || bad "bench 2 ranks: $(tail -3 "$tmp/b")"
if [ "$(grep -c '^Iter #[0-9]*: [0-9.]* img/sec per rank$' "$tmp/b")" -eq 3 ] &&
    grep -q '^Img/sec per rank: [0-9.]* +-[0-9.]*$' "$tmp/b" &&
    [ "$(grep -c '^Total img/sec on 2 ranks: [0-9.]* +-[0-9.]*$' "$tmp/b")" -eq 1 ]; then ok
else bad "bench on 2 ranks: $(cat "$tmp/b")"; fi

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
