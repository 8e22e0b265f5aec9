#!/usr/bin/env bash
# run_multinode.sh - Weft's multi-rank programs on 2 nodes x 2 ranks made on
# this machine by scripts/multinode.sh (doc/testing.md, "Several nodes on one
# machine").
#   run_multinode.sh MULTINODE_SH ALGOS NAME=PROGRAM...
# ALGOS: the allreduce algorithms, comma-separated (weft_algos['allreduce']).
# NAME=PROGRAM: nodes (tests/mpi/test_nodes.c), allreduce, halo, coll, and
# dp (Loom's data-parallel test, when Loom is built).
#
# One multinode.sh run per program (allreduce: one per algorithm, forced with
# WEFT_ALLREDUCE_ALGO), each bounded by LIMIT seconds (then SIGTERM). Checks:
#  - each program passes (exit 0) on 2 nodes x 2 ranks;
#  - mpi_nodes sees 2 nodes of 2 ranks (processor names and
#    MPI_COMM_TYPE_SHARED), and the message it sends through Weft from the
#    second node to rank 0 crossed node 0's veth: wf0 received at least its
#    16 MiB (multinode.sh --stats), so Weft's UCX transport did not take a
#    shared-memory path between nodes;
#  - after every run, the run's namespaces (weft-PID-*) and /etc/netns
#    entries are gone;
#  - a run killed with SIGTERM while its 4 ranks run (`sleep`) exits 143
#    within 15 s, its namespaces and files are gone and none of its
#    processes is left.
# Exits 77 (skipped) when multinode.sh cannot make nodes here (not root, no
# `ip`, no namespaces).
set -u
MN=$1 ALGOS=$2
shift 2
declare -A prog
for a in "$@"; do prog[${a%%=*}]=${a#*=}; done
LIMIT=120 MIB16=$((16 << 20))
fail=0 nrun=0
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-multinode.XXXXXX") || exit 1
watchdog=
cleanup() {
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  rm -rf "$work"
}
# (a run still going when this script is killed ends through its own
# traps: meson's timeout sends SIGTERM to the whole process group)
trap cleanup EXIT

bad() { echo "FAIL: $*"; fail=1; }

# watch PID SECONDS SIGNAL: send SIGNAL to PID after SECONDS (in the
# background; $watchdog, ended by unwatch, takes its sleep with it)
watch() {
  ( sleep "$2" & s=$!
    trap 'kill $s 2>/dev/null; exit 0' TERM
    wait $s && kill -s "$3" "$1" 2>/dev/null ) &
  watchdog=$!
}
unwatch() {
  kill "$watchdog" 2>/dev/null
  wait "$watchdog" 2>/dev/null
  watchdog=
}

# leftovers of multinode.sh run PID: namespaces, /etc/netns entries
check_clean() {
  local pid=$1 what=$2 left
  left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^weft-$pid-")
  [ -z "$left" ] || bad "$what: namespaces left: $left"
  left=$(ls -d /etc/netns/weft-"$pid"-* 2>/dev/null)
  [ -z "$left" ] || bad "$what: /etc/netns entries left: $left"
}

# run NAME [VAR=VALUE...] -- MULTINODE_ARGS... -- CMD...: one multinode.sh
# run, its output in $work/NAME.log; sets rc and pid.
run() {
  local name=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local t0=$SECONDS
  env "${envs[@]}" bash "$MN" "$@" > "$work/$name.log" 2>&1 &
  pid=$!
  watch "$pid" "$LIMIT" TERM
  wait "$pid"
  rc=$?
  unwatch
  nrun=$((nrun + 1))
  if [ "$rc" = 77 ]; then
    echo "SKIP: $(grep 'multinode.sh:' "$work/$name.log" | head -n 1)"
    exit 77
  fi
  if [ "$rc" = 0 ]; then
    echo "ok   $name ($((SECONDS - t0)) s)"
  else
    bad "$name exited $rc after $((SECONDS - t0)) s (limit $LIMIT s); its output:"
    tail -n 30 "$work/$name.log" | sed 's/^/    /'
  fi
  check_clean "$pid" "$name"
}

# 1. the nodes MPI sees, and Weft's bytes on the veth
run nodes -- --nodes 2 --ppn 2 --stats -- "${prog[nodes]}" 2 2 "$MIB16"
grep '^rank [0-9]*: processor name' "$work/nodes.log" | sed 's/^/    /'
rx=$(sed -n 's/^multinode.sh: weft-[0-9]*-n0 .* rx_bytes \([0-9]*\) .*/\1/p' "$work/nodes.log")
if [ -z "$rx" ]; then
  bad "nodes: no wf0 counters of node 0 in the output"
elif [ "$rx" -lt "$MIB16" ]; then
  bad "nodes: node 0's wf0 received $rx bytes, less than the $MIB16 Weft sent to it"
else
  echo "     node 0's wf0 received $rx bytes (Weft sent $MIB16 to it)"
fi

# 2. the programs, allreduce once per algorithm
IFS=, read -r -a algos <<< "$ALGOS"
for a in "${algos[@]}"; do
  run "allreduce-$a" WEFT_ALLREDUCE_ALGO="$a" -- --nodes 2 --ppn 2 -- "${prog[allreduce]}"
done
for p in halo coll dp; do
  [ -n "${prog[$p]:-}" ] || continue
  run "$p" -- --nodes 2 --ppn 2 -- "${prog[$p]}"
done

# 3. SIGTERM while the ranks run: exit 143, nothing left
fail_before=$fail
bash "$MN" --nodes 2 --ppn 2 -- sleep 60 > "$work/term.log" 2>&1 &
pid=$!
ranks=()
for ((i = 0; i < 200 && ${#ranks[@]} < 4; i++)); do
  sleep 0.1
  ranks=()
  for ns in "weft-$pid-n0" "weft-$pid-n1"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && ranks+=("$p:$(cut -d' ' -f22 "/proc/$p/stat")")
    done
  done
done
if [ ${#ranks[@]} -lt 4 ]; then
  bad "sigterm: ${#ranks[@]} of 4 ranks started within 20 s"
fi
t0=$SECONDS
kill -TERM "$pid"
watch "$pid" 15 KILL
wait "$pid"
rc=$?
unwatch
[ "$rc" = 143 ] || bad "sigterm: multinode.sh exited $rc, expected 143"
for r in "${ranks[@]}"; do
  p=${r%%:*} start=${r#*:}
  # the same process (start time), not yet ended (a zombie waits for its
  # new parent to reap it: it runs no more)
  st=$(cut -d' ' -f3,22 "/proc/$p/stat" 2>/dev/null)
  if [ -n "$st" ] && [ "${st#* }" = "$start" ] && [ "${st%% *}" != Z ]; then
    bad "sigterm: rank process $p is still running"
    kill -KILL "$p" 2>/dev/null
  fi
done
check_clean "$pid" sigterm
[ "$fail" = "$fail_before" ] && echo "ok   sigterm: exit $rc after $((SECONDS - t0)) s, ${#ranks[@]} ranks ended, nothing left"

if [ "$fail" = 0 ]; then
  echo "multinode: $nrun runs on 2 nodes x 2 ranks passed, and the SIGTERM check"
  exit 0
fi
echo "multinode: FAILED"
exit 1
