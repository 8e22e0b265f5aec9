#!/bin/bash
# vs_pytorch.sh - training throughput (images/s) of Loom and of PyTorch on the
# CPU, same model, batch, input and thread count, in one run:
#   ResNet-20 on 1x28x28 (10 classes, batch 128)
#   ResNet-18 and ResNet-50 on 3x224x224 (1000 classes, batch 32), synthetic data
#   EDSR baseline x2 (16 blocks, 64 features) on 3x48x48 LR patches, batch 16,
#   L1 loss and Adam (`loom bench --model edsr`'s defaults)
# Each case runs REPEAT times, alternating Loom and PyTorch (the machine is
# shared: the 1-minute load average is printed before every run).  The table
# gives each side's median `Img/sec` over the runs, their ratio Loom/PyTorch,
# and the range of the ratios of the alternating pairs (run r of Loom against
# run r of PyTorch).  Loom's time split by layer type (loom bench --profile)
# is printed with its runs.
#
# usage: loom/benchmarks/vs_pytorch.sh [path/to/loom]
# environment: THREADS (default 2), CASES (default "resnet20 resnet18 resnet50 edsr"),
#   REPEAT (default 3),
#   ITERS/WARMUP (for ResNet-20; the 224x224 and EDSR cases use 3 and 1),
#   LOOM_BENCH_VENV (default: the project's Python environment, ~/.cache/weft-venv or
#   $WEFT_VENV, made by scripts/python_env.sh when it does not import torch).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
THREADS=${THREADS:-2}
CASES=${CASES:-"resnet20 resnet18 resnet50 edsr"}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
REPEAT=${REPEAT:-3}
VENV=${LOOM_BENCH_VENV:-${WEFT_VENV:-$HOME/.cache/weft-venv}}

LOOM=${1:-}
if [ -z "$LOOM" ]; then
    for c in "$root/build/loom/loom" "$root/builddir/loom/loom" "$root/loom/build/loom"; do
        [ -x "$c" ] && LOOM=$c && break
    done
fi
if [ -z "$LOOM" ] || [ ! -x "$LOOM" ]; then
    echo "vs_pytorch.sh: loom binary not found; build it (meson setup build && ninja -C build) or pass its path" >&2
    exit 2
fi

# --- the reference: PyTorch CPU from PyPI in a venv, else JAX, else none
REF=none
PY="$VENV/bin/python"
if [ ! -x "$PY" ] || ! "$PY" -c "import torch" 2>/dev/null; then
    echo "# making $VENV with torch from PyPI (scripts/python_env.sh; several minutes)..."
    WEFT_VENV=$VENV bash "$root/scripts/python_env.sh" >"$VENV.install.log" 2>&1
fi
if "$PY" -c "import torch" 2>/dev/null; then
    REF=pytorch
else
    echo "# PyTorch could not be installed (see $VENV.install.log); trying JAX" >&2
    if "$VENV/bin/pip" install -q jax >>"$VENV.install.log" 2>&1 && "$PY" -c "import jax" 2>/dev/null; then
        echo "# JAX installed, but no JAX ResNet training benchmark is written yet: reporting Loom only" >&2
    else
        echo "# JAX could not be installed either: reporting Loom only" >&2
    fi
fi

export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=1
echo "# $(date -u +%Y-%m-%dT%H:%MZ) machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; threads $THREADS"
[ "$REF" = pytorch ] && echo "# reference: PyTorch $("$PY" -W ignore -c 'import torch; print(torch.__version__)') (CPU)"
echo "# loom: $LOOM"

rate() { sed -n 's/^Img\/sec\( per rank\)\{0,1\}: \([0-9.]*\) +- *\([0-9.]*\)$/\2 \3/p' "$1"; }

tmp=$(mktemp -d /tmp/loom_vs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
summary=""
load() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for model in $CASES; do
    case $model in
    resnet18|resnet34|resnet50) args="--batch 32 --image 224 --channels 3 --classes 1000"; it=3; wu=1 ;;
    edsr) args="--batch 16 --patch 48 --scale 2"; it=3; wu=1 ;;
    *) args="--batch 128 --image 28 --channels 1 --classes 10"; it=$ITERS; wu=$WARMUP ;;
    esac
    echo
    echo "## $model $args threads=$THREADS"
    : >"$tmp/loom.rates"
    : >"$tmp/torch.rates"
    for r in $(seq 1 "$REPEAT"); do
        echo "# run $r/$REPEAT: load average before loom: $(load)"
        "$LOOM" bench --model "$model" $args --synthetic --threads "$THREADS" --iters "$it" \
            --warmup "$wu" --profile >"$tmp/loom.out" 2>&1 || { cat "$tmp/loom.out"; exit 1; }
        sed 's/^/loom    | /' "$tmp/loom.out"
        rate "$tmp/loom.out" >>"$tmp/loom.rates"
        if [ "$REF" = pytorch ]; then
            echo "# run $r/$REPEAT: load average before pytorch: $(load)"
            "$PY" -W ignore "$here/torch_resnet.py" --model "$model" $args --threads "$THREADS" \
                --iters "$it" --warmup "$wu" >"$tmp/torch.out" 2>&1 || { cat "$tmp/torch.out"; exit 1; }
            sed 's/^/pytorch | /' "$tmp/torch.out"
            rate "$tmp/torch.out" >>"$tmp/torch.rates"
        fi
    done
    lm=$(median <"$tmp/loom.rates")
    tm=""
    pairs=""
    if [ "$REF" = pytorch ]; then
        tm=$(median <"$tmp/torch.rates")
        pairs=$(paste -d' ' "$tmp/loom.rates" "$tmp/torch.rates" |
            awk '$3 > 0 { r = $1 / $3; if (NR == 1 || r < lo) lo = r; if (NR == 1 || r > hi) hi = r }
                 END { if (NR) printf "%.2f-%.2fx", lo, hi }')
    fi
    line=$(awk -v m="$model" -v l="$lm" -v t="$tm" -v p="$pairs" 'BEGIN {
        if (t == "") printf "%-10s %10s %10s %8s %14s", m, l, "-", "-", "-";
        else printf "%-10s %10s %10s %7.2fx %14s", m, l, t, l / t, p }')
    summary="$summary$line"$'\n'
done
echo
echo "# Training images/s (synthetic data, $THREADS threads; median of $REPEAT runs' Img/sec means)"
printf '%-10s %10s %10s %8s %14s\n' model loom "$REF" ratio "pair ratios"
printf '%s' "$summary"
