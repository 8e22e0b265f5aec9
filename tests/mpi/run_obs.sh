#!/bin/bash
# run_obs.sh - run test_profile under WEFT_PROFILE and WEFT_TRACE, then check
# the files with check_obs.py (and draw the profile with weft-plot when
# matplotlib is installed).
#   run_obs.sh MPIEXEC NRANKS TEST_PROFILE PYTHON3 CHECK_OBS [WEFT_PLOT]
set -u
MPIEXEC=$1 N=$2 EXE=$3 PY=$4 CHECK=$5 PLOT=${6:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/weft-obs-test.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
WEFT_PROFILE="$dir/prof.json" WEFT_TRACE="$dir/trace.json" WEFT_TEST_DUMP="$dir/dump" \
    "$MPIEXEC" -n "$N" "$EXE" > "$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: test_profile exited $rc"; exit 1; }
grep -q '^# weft-profile: ' "$dir/out.txt" || { echo "FAIL: no profile summary printed"; exit 1; }
"$PY" "$CHECK" "$N" "$dir/prof.json" "$dir/trace" "$dir/dump" || exit 1
if [ -n "$PLOT" ] && "$PY" "$PLOT" --have-matplotlib 2>/dev/null; then
    "$PY" "$PLOT" profile "$dir/prof.json" -o "$dir/prof.png" || { echo "FAIL: weft-plot profile"; exit 1; }
    [ -s "$dir/prof.png" ] || { echo "FAIL: no PNG"; exit 1; }
fi
exit 0
