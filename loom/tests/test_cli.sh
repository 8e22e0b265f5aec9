#!/bin/sh
# test_cli.sh LOOM - the command line: help, bad arguments (a message and
# exit status 2 or 1, never a crash), a short synthetic training run that
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
expect 0 "Usage: loom" train --help
expect 2 "Usage: loom"
expect 2 "unknown command" frobnicate
expect 2 "unknown option" train --bogus 3
expect 2 "needs a value" train --epochs
expect 2 "needs an integer" train --epochs zero
expect 2 "needs an integer" train --batch -4
expect 2 "needs an integer" train --batch 99999999999
expect 2 "needs a number" train --lr nan
expect 2 "needs a number" train --lr -1
expect 2 "unknown data set" train --data imagenet
expect 2 "unknown optimiser" train --optim rmsprop
expect 2 "unknown schedule" train --schedule wobble
expect 2 "unexpected argument" train resnet20
expect 1 "unknown model" train --model resnet19 --data synthetic
expect 1 "unknown model" summary --model vgg16
expect 2 "needs an integer" summary --model resnet50 --image 0
expect 2 "needs an integer" summary --model resnet20 --channels 0
if [ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    expect 1 "no full batch" train --batch 64 --limit-train 10 --epochs 1
fi
expect 2 "eval needs --load" eval
expect 2 "synthetic" bench --model resnet8
expect 1 "Fashion-MNIST not found" train --data-dir "$tmp" --epochs 1
expect 0 "Total:" summary --model resnet20
expect 0 "25557032 parameters" summary --model resnet50 --image 224 --channels 3 --classes 1000

# a short synthetic run, saved weights, metrics
"$LOOM" train --data synthetic --model resnet8 --image 12 --batch 16 --limit-train 64 --epochs 2 \
    --interval 2 --metrics "$tmp/m.csv" --save "$tmp/w.ckpt" >"$tmp/out" 2>&1
st=$?
if [ $st -ne 0 ]; then bad "synthetic train exited $st: $(cat "$tmp/out")"; else ok; fi
n=$(grep -c '^final: test_accuracy=[0-9.]* test_loss=[0-9.]* images_per_s=[0-9.]*$' "$tmp/out")
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
grep -q '^Iter #2: [0-9.]* img/sec$' "$tmp/out" && ok || bad "bench Iter lines: $(cat "$tmp/out")"
grep -q '^Img/sec: [0-9.]* +- [0-9.]*$' "$tmp/out" && ok || bad "bench summary line"
grep -q 'conv' "$tmp/out" && ok || bad "bench profile"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
