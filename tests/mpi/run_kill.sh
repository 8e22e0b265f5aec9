#!/usr/bin/env bash
# run_kill.sh - a rank killed mid-collective: nothing hangs, nothing is left.
#   run_kill.sh MPIEXEC MPI_KILL_LOOP [TRANSPORT]   (mpi, ucx, default: Weft's;
#                                                   shm: the default transport with the
#                                                   node's shared-memory collectives forced)
#
# Runs mpi_kill_loop (tests/mpi/test_kill.c) on 4 ranks with WEFT_TIMEOUT=5,
# waits until every rank is in its loop of collectives, kills rank 2 with
# SIGKILL and then checks that
#  - the job ends within BOUND seconds of the kill (the survivors' collectives
#    fail within WEFT_TIMEOUT, or the launcher ends the job when it sees the
#    dead rank) and reports failure (a non-zero exit);
#  - no process of the run is left: none of the job's processes (the
#    launcher, its proxies - which run in sessions of their own - and the
#    ranks, recorded with their start times before the kill) and no process
#    running the program;
#  - no /dev/shm file that a rank of the run had open or mapped is left
#    (found through /proc/PID/fd and /proc/PID/maps before the kill);
#  - nothing is left in the run's own TMPDIR.
# The whole job runs under `timeout`, and the EXIT trap ends what is left of
# it (the recorded processes, by process id) and removes its files, so that
# a failed check leaves nothing behind either.
set -u
MPIEXEC=$1 EXE=$2 TP=${3:-default}
N=4 VICTIM=2 TIMEOUT_S=5 BOUND=30 LIMIT=120
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-kill-test.XXXXXX") || exit 1
mkdir "$work/tmp"
fail=0
shm_ours="$work/shm-ours" procs="$work/procs"
: >"$shm_ours"
: >"$procs"

# PID and start time (clock ticks since boot) of root and all its descendants.
start_time() { awk '{sub(/.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }
tree() {
  ps -e -o pid=,ppid= | awk -v root="$1" '{up[$1] = $2} END {
    in_tree[root] = 1
    do { more = 0; for (p in up) if (!(p in in_tree) && (up[p] in in_tree)) { in_tree[p] = 1; more = 1 } } while (more)
    for (p in in_tree) print p }' |
  while read -r p; do t=$(start_time "$p") && [ -n "$t" ] && echo "$p $t"; done
}
# The recorded processes that still run (same PID and start time).
alive() { while read -r p t; do [ "$(start_time "$p")" = "$t" ] && echo "$p"; done <"$procs"; }
cleanup() {
  local p
  for p in $(alive); do kill -9 "$p" 2>/dev/null; done
  # stray ranks not recorded (none expected): by their exact program path
  for p in $(pgrep -f -- "^$EXE( |$)" 2>/dev/null); do
    [ "$p" != "$$" ] && kill -9 "$p" 2>/dev/null
  done
  while read -r f; do [ -n "$f" ] && rm -f -- "$f"; done <"$shm_ours"
  rm -rf -- "$work"
}
trap cleanup EXIT
failed() { echo "FAIL: $*"; fail=1; }

envs=(WEFT_TIMEOUT=$TIMEOUT_S TMPDIR="$work/tmp")
case $TP in
default) ;;
shm) envs+=(WEFT_ALLREDUCE_ALGO=shm WEFT_BCAST_ALGO=shm WEFT_ALLGATHER_ALGO=shm) ;;
*) envs+=(WEFT_TRANSPORT="$TP") ;;
esac
env "${envs[@]}" timeout -s KILL "$LIMIT" "$MPIEXEC" -n "$N" "$EXE" --max-seconds 60 \
    >"$work/out" 2>"$work/err" &
job=$!

# Wait until every rank is in the loop.
for _ in $(seq 600); do
  [ "$(grep -c '^ready ' "$work/out" 2>/dev/null)" -ge "$N" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if [ "$(grep -c '^ready ' "$work/out")" -lt "$N" ]; then
  echo "FAIL: the ranks did not all start"; cat "$work/out" "$work/err"; exit 1
fi
victim=$(awk -v r="$VICTIM" '$1 == "ready" && $2 == r {print $3}' "$work/out")
tree "$job" >"$procs"
echo "the job: $(wc -l <"$procs") processes (timeout, mpiexec, proxy, $N ranks)"
# The shared-memory files the ranks hold (open or mapped) before the kill.
for p in $(awk '$1 == "ready" {print $3}' "$work/out"); do
  { ls -l "/proc/$p/fd" 2>/dev/null | grep -o '/dev/shm/.*'
    grep -o '/dev/shm/.*' "/proc/$p/maps" 2>/dev/null; }
done | sort -u >"$work/shm-held"
# "(deleted)": unlinked already while mapped (MPICH and UCX do that once all
# ranks have attached), so it cannot be left behind.
unlinked=$(grep -c ' (deleted)$' "$work/shm-held")
sed 's/ (deleted)$//' "$work/shm-held" | sort -u >"$shm_ours"
sleep 0.5
t0=$(date +%s%N)
kill -9 "$victim"
wait "$job"
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
dt=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
echo "killed rank $VICTIM (pid $victim) mid-collective; the job ended ${dt} s later, exit $rc"
[ "$rc" -ne 0 ] || failed "the job reported success"
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || failed "the job hung: stopped by timeout after ${LIMIT} s"
[ "$ms" -le $((BOUND * 1000)) ] || failed "the job took ${dt} s to end after the kill (bound ${BOUND} s)"
echo "--- the survivors' and the launcher's reports:"
grep -hE '^survivor |BAD TERMINATION|KILLED BY SIGNAL|EXIT CODE' "$work/err" "$work/out" | sort -u | head -20
if grep -q '^survivor .*failed' "$work/err"; then
  echo "(the survivors' collectives returned an error)"
else
  echo "(the launcher ended the job before the survivors' collectives returned)"
fi
grep -E '^Found [0-9]+ errors|: rank [0-9]+: ' "$work/out" "$work/err" | grep -v '^survivor' | head -5

# Leftovers: wait briefly for the kernel to reap what the launcher killed.
for _ in $(seq 50); do
  [ -z "$(alive)" ] && [ -z "$(pgrep -f -- "^$EXE( |$)")" ] && break
  sleep 0.1
done
left=$( { alive; pgrep -f -- "^$EXE( |$)"; } 2>/dev/null | sort -u)
if [ -n "$left" ]; then
  failed "processes of the run left behind:"
  ps -o pid,stat,args -p $(echo $left | tr ' ' ',') 2>/dev/null
fi
shm_left=()
while read -r f; do [ -n "$f" ] && [ -e "$f" ] && shm_left+=("$f"); done <"$shm_ours"
if [ ${#shm_left[@]} -gt 0 ]; then
  failed "shared-memory files of the run left in /dev/shm (removed now): ${shm_left[*]}"
else
  echo "no /dev/shm file of the run left ($(grep -c . "$shm_ours") held by the ranks, $unlinked of them unlinked while mapped)"
fi
if [ -n "$(ls -A "$work/tmp")" ]; then
  failed "files left in the run's TMPDIR: $(ls -A "$work/tmp" | head -5 | tr '\n' ' ')"
fi
[ "$fail" -eq 0 ] && echo "PASS: no hang, nothing left behind"
exit "$fail"
