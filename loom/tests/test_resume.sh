#!/bin/sh
# test_resume.sh MPIEXEC LOOM - checkpoint/restart resumes the exact run.
#
# For ResNet-20 on 1 rank, on 2 data-parallel ranks, and the mesh model on 4
# ranks (2 sample groups x 2x1 spatial): a run checkpointing every few steps
# is killed with SIGKILL (LOOM_TEST_KILL_AT=STEP:RANK, the rank kills
# itself as kill -9 would, while its background writer may be mid-write),
# resumed with --resume, and its final weights must be bitwise equal to the
# uninterrupted run's.  Weft's cost model is not measured (WEFT_MEASURE=0),
# so every run picks the same all-reduce algorithm per bucket.
# Then: the level-2 copy (--ckpt-flush-dir) of a run that ended resumes
# alike, and the killed run's resumes alike or is refused when incomplete; the blocking
# writer (--ckpt-sync) too; a corrupt, truncated or partial newest
# checkpoint is skipped with a message (the older one is used, same final
# bits); the newest --ckpt-keep are kept; nothing complete left: exit 1; another model, configuration or
# layout: refused with exit 2 and a message naming what differs.
set -u
MPIEXEC=$1
LOOM=$2
export WEFT_MEASURE=0
pass=0
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# case NAME RANKS KILL OPTIONS... : full run, killed run, resumed run, cmp
case_run() {
    name=$1 n=$2 kill=$3
    shift 3
    d="$tmp/$name"
    mkdir -p "$d"
    "$MPIEXEC" -n "$n" "$LOOM" train "$@" --save "$d/full.w" >"$d/full.log" 2>&1 || bad "$name: full run: $(tail -3 "$d/full.log")"
    LOOM_TEST_KILL_AT=$kill "$MPIEXEC" -n "$n" "$LOOM" train "$@" --ckpt-dir "$d/ck" --ckpt-every 2 \
        --ckpt-flush-dir "$d/pfs" --ckpt-flush-every 2 --save "$d/never.w" >"$d/kill.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ ! -e "$d/never.w" ] && ls "$d/ck"/step-*/MANIFEST >/dev/null 2>&1; then ok
    else bad "$name: the killed run exited $rc or left no checkpoint: $(tail -3 "$d/kill.log")"; fi
    "$MPIEXEC" -n "$n" "$LOOM" train "$@" --ckpt-dir "$d/ck" --ckpt-every 2 --resume "$d/ck" \
        --ckpt-flush-dir "$d/pfs2" --ckpt-flush-every 2 \
        --save "$d/res.w" >"$d/res.log" 2>&1 || bad "$name: resumed run: $(tail -3 "$d/res.log")"
    grep -q '^# resumed from .*/step-' "$d/res.log" && ok || bad "$name: no 'resumed from' line"
    if cmp -s "$d/full.w" "$d/res.w"; then ok; else bad "$name: resumed weights differ from the uninterrupted run's"; fi
    # level 2 of a run that ended normally (every write waited for) holds
    # every second checkpoint and resumes the same way
    "$MPIEXEC" -n "$n" "$LOOM" train "$@" --resume "$d/pfs2" --save "$d/pfs2.w" >"$d/pfs2.log" 2>&1 || bad "$name: resume from level 2: $(tail -3 "$d/pfs2.log")"
    if cmp -s "$d/full.w" "$d/pfs2.w"; then ok; else bad "$name: level-2 resume differs"; fi
    # level 2 of the killed run. Its
    # copy is written in the background too: on a loaded machine the kill
    # can come before the first copy finished, and then the only right
    # answer is exit 1 with "no complete checkpoint".
    "$MPIEXEC" -n "$n" "$LOOM" train "$@" --resume "$d/pfs" --save "$d/pfs.w" >"$d/pfs.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$d/full.w" "$d/pfs.w"; then ok
    elif [ $rc -eq 1 ] && grep -q 'no complete checkpoint' "$d/pfs.log"; then
        # the kill came before every rank's first copy was on disk (a loaded machine)
        echo "note: $name: the killed run's level-2 copy was not complete; refused as it must be"
        ok
    else
        bad "$name: killed run's level 2: resume exited $rc, or its weights differ: $(tail -3 "$d/pfs.log")"
    fi
}

R="--model resnet20 --synthetic --image 12 --batch 4 --limit-train 48 --epochs 3 --interval 100 --threads 1 --nesterov --warmup-epochs 0.5"
case_run r1 1 13:0 $R --batch 8
case_run r2 2 11:1 $R --bucket-mb 0.05
M="--model mesh --mesh-size 16 --train-samples 16 --test-samples 4 --batch 2 --epochs 2 --interval 100 --threads 1"
case_run m4 4 5:3 $M --spatial 2x1

# the blocking writer: same bits
d="$tmp/r1"
LOOM_TEST_KILL_AT=9 "$LOOM" train $R --batch 8 --ckpt-dir "$d/sync" --ckpt-every 4 --ckpt-sync >"$d/s.log" 2>&1
"$LOOM" train $R --batch 8 --ckpt-dir "$d/sync" --ckpt-every 4 --ckpt-sync --resume "$d/sync" --save "$d/sync.w" >"$d/s2.log" 2>&1 || bad "sync resume: $(tail -3 "$d/s2.log")"
if cmp -s "$d/full.w" "$d/sync.w"; then ok; else bad "--ckpt-sync resume differs"; fi
grep -q '^# checkpoints: .* (sync)' "$d/s2.log" && ok || bad "no checkpoint summary line"

# damaged checkpoints: a fresh set, killed at step 12 with checkpoints every 4
# steps kept 3 deep (4, 8, 12), then each newest one damaged in turn
d="$tmp/dmg"
mkdir -p "$d"
mk() {
    rm -rf "$d/ck"
    LOOM_TEST_KILL_AT=12 "$LOOM" train $R --batch 8 --ckpt-dir "$d/ck" --ckpt-every 4 --ckpt-keep 3 --ckpt-sync >/dev/null 2>&1
}
resume_expect() { # WHAT PATTERN
    "$LOOM" train $R --batch 8 --resume "$d/ck" --save "$d/w" >"$d/o" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "$2" "$d/o" && grep -q "^# resumed from .*step-0000000008" "$d/o" && cmp -s "$tmp/r1/full.w" "$d/w"
    then ok; else bad "$1: rc $rc, expected a fallback to step 8 with '$2': $(grep -v '^epoch' "$d/o" | head -5)"; fi
}
top="$d/ck/step-0000000012"
mk; printf 'X' | dd of="$top/rank-00000.bin" bs=1 seek=4000 conv=notrunc 2>/dev/null
resume_expect "flipped byte" "skipping .*step-0000000012.*checksum mismatch"
mk; f="$top/rank-00000.bin"; head -c 1000 "$f" >"$f.t" && mv "$f.t" "$f"
resume_expect "truncated rank file" "skipping .*step-0000000012.*truncated"
mk; rm "$top/MANIFEST"
resume_expect "partial (no manifest)" "skipping .*step-0000000012.*incomplete"
mk; sed -i 's/^step 12$/step 13/' "$top/MANIFEST"
resume_expect "edited manifest" "skipping .*step-0000000012.*manifest checksum mismatch"
mk; head -c 100 "$top/MANIFEST" >"$d/m" && mv "$d/m" "$top/MANIFEST"
resume_expect "truncated manifest" "skipping .*step-0000000012.*manifest"
mk; : >"$top/rank-00000.bin"
resume_expect "empty rank file" "skipping .*step-0000000012"
mk; for s in "$d"/ck/step-*; do printf 'X' | dd of="$s/rank-00000.bin" bs=1 seek=100 conv=notrunc 2>/dev/null; done
"$LOOM" train $R --batch 8 --resume "$d/ck" >"$d/o" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q 'no complete checkpoint' "$d/o"; then ok; else bad "all damaged: rc $rc $(tail -3 "$d/o")"; fi
"$LOOM" train $R --batch 8 --resume "$d/none" >"$d/o" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q 'no complete checkpoint' "$d/o"; then ok; else bad "missing dir: rc $rc"; fi

# the newest --ckpt-keep are kept: resumed at 12, saved at 16, step 4 pruned
mk
"$LOOM" train $R --batch 8 --ckpt-dir "$d/ck" --ckpt-every 4 --ckpt-keep 3 --ckpt-sync --resume "$d/ck" >"$d/o" 2>&1 || bad "keep: $(tail -3 "$d/o")"
kept=$(cd "$d/ck" && echo step-*)
if [ "$kept" = "step-0000000008 step-0000000012 step-0000000016" ]; then ok; else bad "--ckpt-keep 3 left: $kept"; fi

# another model, configuration or layout: refused, exit 2, named
mk
refuse() { # WHAT PATTERN RANKS ARGS...
    what=$1 pat=$2 n=$3
    shift 3
    "$MPIEXEC" -n "$n" "$LOOM" train "$@" --resume "$d/ck" >"$d/o" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$pat" "$d/o"; then ok; else bad "$what: rc $rc $(tail -3 "$d/o")"; fi
}
refuse "other model" "model 'resnet20', this run trains 'resnet14'" 1 $R --batch 8 --model resnet14
refuse "other lr" "checkpoint has lr=0.1, this run lr=0.2" 1 $R --batch 8 --lr 0.2
refuse "other layout" "written by 1 ranks (data-parallel 1, spatial 1x1); this run has 2" 2 $R --batch 8

echo "$pass passed, $fails failed"
[ $fails -eq 0 ]
