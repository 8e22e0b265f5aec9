#!/bin/bash
# test_tune.sh - weft-tune on 2 ranks with tiny sizes writes a tuning file that
# WEFT_TUNING_FILE loads, and the file changes the selection weft-info reports.
#   test_tune.sh MPIEXEC WEFT_TUNE WEFT_INFO WEFT_SCALE [PYTHON3 WEFT_PLOT]
set -u
MPIEXEC=$1 TUNE=$2 INFO=$3 SCALE=$4 PY=${5:-} PLOT=${6:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/weft-tune-test.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail=0
err() { echo "FAIL: $*"; fail=1; }

# 1. weft-tune writes a file (allreduce and bcast, 4 B .. 4 KiB, few iterations).
"$MPIEXEC" -n 2 "$TUNE" -m 4:4096 -i 5 -x 2 -r 3 -c allreduce,bcast,barrier -o "$dir/tune.txt" \
    > "$dir/tune.out" 2>&1 || { cat "$dir/tune.out"; err "weft-tune exited with $?"; }
cat "$dir/tune.out"
[ -s "$dir/tune.txt" ] || err "weft-tune wrote no file"
head -1 "$dir/tune.txt" | grep -qx 'weft-tuning 1' || err "no 'weft-tuning 1' header"
grep -q '^alpha ' "$dir/tune.txt" || err "no alpha line"
grep -q '^rule allreduce 2 0 ' "$dir/tune.txt" || err "no allreduce rule from 0 bytes for 2 ranks"
grep -q '^crossover allreduce' "$dir/tune.out" || err "no crossover line printed for allreduce"
cat "$dir/tune.txt"

# 2. weft-info: without a file every allreduce row comes from the model; with
#    weft-tune's file the rows 4..4096 for 2 ranks come from its rules, and the
#    chosen algorithm is the file's.
"$INFO" --ranks 2 --coll allreduce -m 4:8192 --no-vars > "$dir/info0.txt" 2>&1 || err "weft-info failed"
WEFT_TUNING_FILE="$dir/tune.txt" "$INFO" --ranks 2 --coll allreduce -m 4:8192 --no-vars \
    > "$dir/info1.txt" 2>&1 || err "weft-info with the tuning file failed"
n0=$(awk '$1=="allreduce" && $4=="model"' "$dir/info0.txt" | wc -l)
n1=$(awk '$1=="allreduce" && $2<=4096 && $4=="rule"' "$dir/info1.txt" | wc -l)
[ "$n0" -eq 12 ] || err "expected 12 model rows without a file, got $n0"
[ "$n1" -eq 11 ] || err "expected 11 rule rows (4..4096) with weft-tune's file, got $n1"
while read -r _ coll p lo hi algo; do
    [ "$coll" = allreduce ] || continue
    got=$(awk -v s="$hi" '$1=="allreduce" && $2==s {print $3}' "$dir/info1.txt")
    [ "$got" = "$algo" ] || err "size $hi: weft-info says '$got', the file says '$algo'"
done < <(grep '^rule ' "$dir/tune.txt")
grep -q 'tuning file' "$dir/info1.txt" || err "weft-info does not say the cost came from the file"

# 3. A handwritten rule forcing an algorithm the model does not pick changes the choice.
model=$(awk '$1=="allreduce" && $2==1024 {print $3}' "$dir/info0.txt")
other=ring; [ "$model" = ring ] && other=recursive_doubling
printf 'weft-tuning 1\n# forces %s\nrule allreduce * 512 2048 %s\n' "$other" "$other" > "$dir/force.txt"
WEFT_TUNING_FILE="$dir/force.txt" "$INFO" --ranks 2 --coll allreduce -m 4:8192 --no-vars \
    > "$dir/info2.txt" 2>&1 || err "weft-info with the handwritten file failed"
got=$(awk '$1=="allreduce" && $2==1024 {print $3 "/" $4}' "$dir/info2.txt")
[ "$got" = "$other/rule" ] || err "1024 B: expected $other/rule with the handwritten file, got $got (model: $model)"
got=$(awk '$1=="allreduce" && $2==4096 {print $4}' "$dir/info2.txt")
[ "$got" = model ] || err "4096 B is outside the rule but is not from the model ($got)"

# 4. A malformed tuning file is refused (weft_init fails, no crash).
printf 'weft-tuning 1\nrule allreduce 2 0 10 no_such_algo\n' > "$dir/bad.txt"
WEFT_TUNING_FILE="$dir/bad.txt" "$INFO" --no-vars > "$dir/info3.txt" 2>&1
rc=$?
[ "$rc" -eq 1 ] || err "weft-info with a malformed tuning file exited $rc, expected 1"

# 5. weft-scale reads the cost from the file; weft-plot draws it when matplotlib is here.
"$SCALE" --tuning "$dir/tune.txt" -p 2:64 --csv "$dir/scale.csv" > "$dir/scale.out" 2>&1 \
    || err "weft-scale --tuning failed"
grep -q 'from the tuning file' "$dir/scale.out" || err "weft-scale did not take the file's cost"
if [ -n "$PY" ] && [ -n "$PLOT" ] && "$PY" "$PLOT" --have-matplotlib 2>/dev/null; then
    "$PY" "$PLOT" scale "$dir/scale.csv" -o "$dir/scale.png" || err "weft-plot scale failed"
    [ -s "$dir/scale.png" ] || err "weft-plot wrote no PNG"
fi

# 6. On a communicator that spans nodes (2 test nodes of 2 ranks) weft-tune
#    also measures inside a node and writes alpha_node/beta_node, which load.
WEFT_NODE_RANKS=2 "$MPIEXEC" -n 4 "$TUNE" -m 4:64 -i 3 -x 1 -r 1 -c barrier -o "$dir/nodes.txt" \
    > "$dir/nodes.out" 2>&1 || { cat "$dir/nodes.out"; err "weft-tune on 2 x 2 test nodes exited with $?"; }
grep -q '^# 2 nodes: .*alpha_node' "$dir/nodes.out" || err "weft-tune did not report the node figures"
for k in alpha beta alpha_node beta_node; do
    v=$(awk -v k="$k" '$1==k {print $2}' "$dir/nodes.txt")
    awk -v v="$v" 'BEGIN {exit !(v != "" && v + 0 > 0)}' ||
        err "2 x 2 nodes: no positive $k line in the file ('$v')"
done
WEFT_TUNING_FILE="$dir/nodes.txt" "$INFO" --ranks 4 --nodes 2 --ppn 2 --coll barrier --no-vars \
    > "$dir/info4.txt" 2>&1 || { cat "$dir/info4.txt"; err "weft-info with the 2 x 2 nodes file failed"; }

[ "$fail" -eq 0 ] && echo "test_tune: ok"
exit "$fail"
