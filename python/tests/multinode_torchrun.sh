#!/usr/bin/env bash
# multinode_torchrun.sh MULTINODE_SH TORCHRUN - torchrun on 2 "nodes" x 2
# workers made on this machine by scripts/multinode.sh (network and UTS
# namespaces joined by a veth pair), running torchrun_job.py with the weft
# backend. Checks: every rank's checks pass (collectives, a group, DDP
# against a float64 reference, and the hierarchical algorithm chosen, so
# MPI and Weft saw 2 nodes from the node names the workers gave rank 0's
# startup server); rank 1 reached rank 0's server across the veth; nothing
# is reported as an error, also at finalize (UCX endpoints closed in step).
# Exits 77 (skipped) when multinode.sh cannot make nodes here (not root).
set -u
MN=$1 TORCHRUN=$2
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$TORCHRUN" ] || { echo "no torchrun at $TORCHRUN: skipped"; exit 77; }
log=$(mktemp "${TMPDIR:-/tmp}/weft-mn-torchrun.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
TORCHRUN_TEST_NODES=2 WEFT_ALLREDUCE_ALGO=shm timeout -s TERM 240 \
    bash "$MN" --nodes 2 --ppn 1 -- bash "$here/torchrun_node.sh" "$TORCHRUN" \
    "$here/torchrun_job.py" > "$log" 2>&1
rc=$?
[ "$rc" = 77 ] && { cat "$log"; exit 77; }
fail=0
[ "$rc" = 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for r in 0 1 2 3; do
  grep -q "rank $r of 4: ok" "$log" || { echo "FAIL: rank $r did not pass"; fail=1; }
done
if grep -E "weft error|UCX +ERROR|weft bootstrap:" "$log"; then
  echo "FAIL: errors reported (above)"; fail=1
fi
[ "$fail" = 0 ] || { echo "---- output"; cat "$log"; exit 1; }
echo "ok: torchrun on 2 nodes x 2 workers"
