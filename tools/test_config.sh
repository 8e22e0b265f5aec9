#!/usr/bin/env bash
# Configuration strictness (doc/config.md, "Strictness"), through the real
# programs: a WEFT_ typo is warned about with the closest name; an output
# path that cannot be written fails weft_init (not lost data at finalize);
# a forced algorithm that cannot serve host buffers is reported as what runs;
# an unknown algorithm's error lists the valid ones; weft-info --config prints
# the table with the values in effect.
# Usage: test_config.sh MPIEXEC WEFT_INFO WEFT_OSU_ALLREDUCE
set -uo pipefail
mpiexec=$1 info=$2 bench=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-config-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nerr=0
err() { echo "test_config: FAIL: $*" >&2; nerr=$((nerr + 1)); }
has() { grep -q -- "$2" "$1" || { err "$3: expected '$2' in:"; sed 's/^/    /' "$1" >&2; }; }
hasnt() { ! grep -q -- "$2" "$1" || { err "$3: did not expect '$2' in:"; sed 's/^/    /' "$1" >&2; }; }

# 1. Unknown WEFT_ variables: warned at weft_init, with the closest name.
WEFT_ALLREDUCE_ALOG=ring WEFT_TIMOUT=5 WEFT_NOTHING_LIKE_IT=1 WEFT_UCX_TLS=self \
    "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || err "weft-info with typos exits $?"
has "$tmp/err" "WEFT_ALLREDUCE_ALOG is not a Weft variable and is ignored; did you mean WEFT_ALLREDUCE_ALGO?" typo
has "$tmp/err" "did you mean WEFT_TIMEOUT?" typo2
has "$tmp/err" "WEFT_NOTHING_LIKE_IT is not a Weft variable" unknown
hasnt "$tmp/err" "WEFT_UCX_TLS" "UCX's own prefix"
# Once per run, by rank 0, under mpiexec too.
WEFT_ALLREDUCE_ALOG=ring "$mpiexec" -n 2 "$info" --no-vars > "$tmp/out" 2> "$tmp/err" ||
    err "weft-info -n 2 with a typo exits $?"
[ "$(grep -c 'WEFT_ALLREDUCE_ALOG' "$tmp/err")" = 1 ] || err "the typo is not reported exactly once on 2 ranks"
WEFT_LOG_LEVEL=0 WEFT_ALLREDUCE_ALOG=ring "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || err "log level 0 run"
hasnt "$tmp/err" "ALOG" "WEFT_LOG_LEVEL=0 silences"

# 2. Output paths checked at weft_init: a clear error then, exit status 1.
for var in WEFT_PROFILE WEFT_TRACE; do
    rc=0
    env "$var=$tmp/missing/out.json" "$mpiexec" -n 2 "$bench" -m 4:8 -i 2 -x 0 -r 1 --quiet \
        > "$tmp/out" 2> "$tmp/err" || rc=$?
    [ "$rc" = 1 ] || err "$var into a missing directory: exit $rc, not 1"
    has "$tmp/err" "$var: cannot write $tmp/missing/out" "$var missing directory"
    has "$tmp/err" "directory $tmp/missing does not exist" "$var names the directory"
    hasnt "$tmp/out" "^4 " "$var: no rows ran"
done
rc=0
WEFT_PROFILE="$tmp" "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] || err "WEFT_PROFILE naming a directory: exit $rc, not 1"
has "$tmp/err" "is a directory" "WEFT_PROFILE directory"
# ... and a good one still works and writes its file.
WEFT_PROFILE="$tmp/p.json" "$mpiexec" -n 2 "$bench" -m 4:8 -i 2 -x 0 -r 1 --quiet > "$tmp/out" 2> "$tmp/err" ||
    err "WEFT_PROFILE into a good directory: exit $?"
[ -s "$tmp/p.json" ] || err "WEFT_PROFILE wrote nothing"

# 3. Names: an unknown algorithm lists the valid ones.
rc=0
WEFT_ALLREDUCE_ALGO=rign "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" != 0 ] || err "WEFT_ALLREDUCE_ALGO=rign accepted"
has "$tmp/err" 'WEFT_ALLREDUCE_ALGO="rign": no such algorithm for allreduce in this build; valid: auto, ring, recursive_doubling' "valid algorithms"
rc=0
WEFT_BARRIER_ALGO=ring "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" != 0 ] || err "WEFT_BARRIER_ALGO=ring accepted"
has "$tmp/err" "valid: auto, dissemination" "valid barrier algorithms"
rc=0
WEFT_TRACE_KEEP=middle "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" != 0 ] || err "WEFT_TRACE_KEEP=middle accepted"
has "$tmp/err" "expected first or last" "WEFT_TRACE_KEEP names"

# 4. A forced algorithm that cannot serve the call: NCCL on host buffers (in a
#    build with NCCL; without it the name is refused, as in 3).
"$info" --no-vars > "$tmp/backends" 2>/dev/null || err "weft-info exits $?"
if grep -q "nccl   yes" "$tmp/backends"; then
    WEFT_ALLREDUCE_ALGO=nccl "$info" --no-vars --ranks 4 --coll allreduce -m 4:64K \
        > "$tmp/out" 2> "$tmp/err" || err "weft-info with nccl forced exits $?"
    has "$tmp/err" "WEFT_ALLREDUCE_ALGO=nccl: NCCL serves device buffers" "logged fallback"
    hasnt "$tmp/out" "^  allreduce .* nccl " "weft-info's table shows what runs"
    has "$tmp/out" "^  allreduce  *4  recursive_doubling  env\*" "weft-info marks the fallback"
    WEFT_ALLREDUCE_ALGO=nccl "$mpiexec" -n 2 "$bench" -m 4:1K -i 5 -x 1 -r 1 --quiet \
        > "$tmp/out" 2> "$tmp/err" || err "benchmark with nccl forced exits $?"
    has "$tmp/out" "# Algorithm: nccl cannot serve host buffers: on them Weft runs" "benchmark header"
    hasnt "$tmp/out" "^[0-9].* nccl$" "benchmark rows name what ran"
else
    rc=0
    WEFT_ALLREDUCE_ALGO=nccl "$info" --no-vars > "$tmp/out" 2> "$tmp/err" || rc=$?
    [ "$rc" != 0 ] || err "WEFT_ALLREDUCE_ALGO=nccl accepted in a build without NCCL"
    has "$tmp/err" "valid: auto, ring" "nccl refused with the valid names"
fi

# 5. weft-info --config: every row of the table, with the value in effect.
WEFT_TIMEOUT=7.5 WEFT_TRANSPORT=mpi WEFT_TRACE_KEEP=last "$info" --config > "$tmp/out" 2> "$tmp/err" ||
    err "weft-info --config exits $?"
has "$tmp/out" "^  WEFT_TIMEOUT = 7.5 (from the environment; default 600; valid: a number, 0 .. 1000000000)" "--config value"
has "$tmp/out" "^  WEFT_TRANSPORT = mpi (from the environment; default auto; valid: auto, mpi, ucx)" "--config name"
has "$tmp/out" "^  WEFT_TRACE_KEEP = last " "--config trace keep"
has "$tmp/out" "^  WEFT_SPIN = 100 (default 100; valid: 0 .. 100000000)" "--config default"
has "$tmp/out" "^  WEFT_MPI_CALLS = all (default all; valid: text; read by libweft-mpi.so" "--config read elsewhere"
hasnt "$tmp/out" "^Selection table" "--config prints only the variables"
"$info" --config-markdown > "$tmp/md" || err "weft-info --config-markdown exits $?"
[ "$(grep -c '^  WEFT_' "$tmp/out")" = "$(grep -c '^| `WEFT_' "$tmp/md")" ] ||
    err "--config and --config-markdown list different numbers of variables"

[ "$nerr" = 0 ] && echo "test_config: ok"
exit $((nerr > 0))
