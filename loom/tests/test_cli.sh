#!/bin/sh
# test_cli.sh LOOM - the command line on one process: --help and --version of
# loom and each subcommand, bad arguments (a message naming the option and
# exit status 2, or 1 for run-time failures, never a crash), a short synthetic training run that
# ends with exactly one 'final:' line, checkpoint save, corrupt checkpoint
# refused, bench output format.
LOOM=${1:?usage: test_cli.sh path/to/loom}
pass=0
fail=0
tmp=$(mktemp -d /tmp/loom_cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect STATUS PATTERN ARGS... : exit status and a pattern in stdout+stderr
expect() {
    want=$1 pat=$2
    shift 2
    "$LOOM" "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        bad "loom $* exited $got, expected $want: $(head -c 300 "$tmp/out")"
    elif ! grep -q -- "$pat" "$tmp/out"; then
        bad "loom $* output lacks '$pat': $(head -c 300 "$tmp/out")"
    else
        ok
    fi
}

expect 0 "Usage: loom" --help
expect 0 "loom train \[--model" train --help
expect 2 "Usage: loom"
expect 2 "unknown command" frobnicate
expect 0 "^loom [0-9]*\.[0-9]* (Weft" --version
for cmd in train eval bench summary; do
    expect 0 "Usage: .*loom $cmd" $cmd --help
    expect 0 "^loom [0-9]*\.[0-9]* (Weft" $cmd --version
done
expect 0 "--ckpt-dir DIR" train --help
expect 0 "--resume DIR" train --help
expect 0 "--data-parallel D" train --help
# a bad option names the option and exits 2
expect 2 "unknown option '--bogus'" train --bogus 3
expect 2 "option --epochs needs a value" train --epochs
expect 2 "option --metrics needs a value" train --metrics
expect 2 "option --save needs a value" train --save
expect 2 "--epochs needs a whole number" train --epochs zero
expect 2 "--batch needs a whole number" train --batch -4
expect 2 "--batch needs a whole number" train --batch 99999999999
expect 2 "--lr needs a number" train --lr nan
expect 2 "--lr needs a number" train --lr -1
expect 2 "--lr needs a number .* (got 'x.csv')" train --lr x.csv
expect 2 "--bucket-mb needs a number" train --bucket-mb inf
expect 2 "option '--nesterov' takes no value" train --nesterov=1
expect 2 "--data must be one of" train --data imagenet
expect 2 "--optim must be one of sgd|adam" train --optim rmsprop
expect 2 "--schedule must be one of" train --schedule wobble
expect 2 "--spatial wants HxW" train --spatial 2by1
expect 2 "unexpected argument 'resnet20'" train resnet20
expect 2 "'--iters' does not apply" train --iters 3
expect 2 "Run 'loom train --help'" train --bogus 3
expect 2 "mesh model only" train --model resnet8 --spatial 2x1 --synthetic
expect 2 "D\*H\*W" train --model mesh --data-parallel 2
expect 2 "need --ckpt-dir" train --synthetic --ckpt-every 3
expect 2 "--ckpt-keep needs a whole number" train --synthetic --ckpt-dir "$tmp/c" --ckpt-keep 1
expect 1 "unknown model" train --model resnet19 --data synthetic
expect 1 "unknown model" summary --model vgg16
expect 2 "--image needs a whole number" summary --model resnet50 --image 0
expect 2 "--channels needs a whole number" summary --model resnet20 --channels 0
if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    expect 1 "no full batch" train --batch 64 --limit-train 10 --epochs 1
fi
expect 2 "needs --load FILE" eval
expect 2 "synthetic" bench --model resnet8
expect 1 "Fashion-MNIST not found" train --data-dir "$tmp" --epochs 1
expect 0 "Total:" summary --model resnet20
expect 0 "25557032 parameters" summary --model resnet50 --image 224 --channels 3 --classes 1000
expect 0 "40056 parameters" summary --model mesh

# a short synthetic run, saved weights, metrics
"$LOOM" train --data synthetic --model resnet8 --image 12 --batch 16 --limit-train 64 --epochs 2 \
    --interval 2 --metrics "$tmp/m.csv" --save "$tmp/w.ckpt" >"$tmp/out" 2>&1
st=$?
if [ $st -ne 0 ]; then bad "synthetic train exited $st: $(cat "$tmp/out")"; else ok; fi
n=$(grep -c '^final: test_accuracy=[0-9.]* test_loss=[0-9.]* images_per_s=[0-9.]* comm_wait_share=[0-9.]*$' "$tmp/out")
[ "$n" = 1 ] && ok || bad "expected exactly one final line, got $n"
grep -q '^kind,epoch,step,loss,accuracy,lr,images_per_s,elapsed_s$' "$tmp/m.csv" && ok || bad "metrics header"
[ -s "$tmp/w.ckpt" ] && ok || bad "no checkpoint written"
expect 0 "final:" train --data synthetic --model resnet8 --image 12 --batch 16 --limit-train 32 \
    --epochs 1 --load "$tmp/w.ckpt"
expect 1 "not 'resnet14'" train --data synthetic --model resnet14 --image 12 --batch 16 \
    --limit-train 32 --epochs 1 --load "$tmp/w.ckpt"
printf 'garbage' | dd of="$tmp/w.ckpt" bs=1 seek=200 conv=notrunc 2>/dev/null
expect 1 "checksum" train --data synthetic --model resnet8 --image 12 --batch 16 --limit-train 32 \
    --epochs 1 --load "$tmp/w.ckpt"
expect 1 "cannot open" train --data synthetic --model resnet8 --image 12 --load "$tmp/none.ckpt"
"$LOOM" bench --model resnet8 --synthetic --batch 8 --image 16 --channels 1 --classes 10 \
    --iters 3 --warmup 1 --profile >"$tmp/out" 2>&1
[ "$(grep -c '^Iter #[0-9]*: [0-9.]* img/sec per rank$' "$tmp/out")" = 3 ] && ok || bad "bench Iter lines: $(cat "$tmp/out")"
grep -q '^Img/sec per rank: [0-9.]* +-[0-9.]*$' "$tmp/out" && ok || bad "bench per-rank line"
grep -q '^Total img/sec on 1 rank: [0-9.]* +-[0-9.]*$' "$tmp/out" && ok || bad "bench total line"
grep -q 'conv' "$tmp/out" && ok || bad "bench profile"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
