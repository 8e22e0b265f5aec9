#!/usr/bin/env bash
# Traces (doc/observability.md): a 4-rank run with WEFT_TRACE, merged by
# weft-trace into one Chrome/Perfetto JSON with 4 process tracks and
# timestamps in order on rank 0's clock; the clock offsets (0 on one node,
# within half a round trip of 0 when measured); the bounded buffer in both
# WEFT_TRACE_KEEP modes; merge's refusals.
# Usage: test_trace.sh MPIEXEC TRACE_WORKLOAD WEFT_TRACE_TOOL PYTHON3
set -uo pipefail
mpiexec=$1 workload=$2 tool=$3 py=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weft-trace-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nerr=0
err() { echo "test_trace: FAIL: $*" >&2; nerr=$((nerr + 1)); }
run() { # DIR ENV... : a 4-rank allreduce run traced into DIR/t.RANK.json
    local dir=$1; shift
    mkdir -p "$dir"
    env WEFT_TRACE="$dir/t.json" "$@" "$mpiexec" -n 4 "$workload" 300 \
        > "$dir/out" 2> "$dir/err" || { err "traced run ($*) exits $?"; cat "$dir/err" >&2; }
}
check() { "$py" - "$@" || err "check $1 failed"; }

# 1. Merge a 4-rank run.
run "$tmp/a"
"$py" "$tool" merge "$tmp/a/t.json" -o "$tmp/a/merged.json" > "$tmp/a/merge.out" ||
    err "weft-trace merge exits $?"
check "$tmp/a" <<'PY'
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/merged.json"))
ev = m["traceEvents"]
procs = {e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
assert procs == {0, 1, 2, 3}, "process tracks %s" % procs
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
assert names == {r: "rank %d" % r for r in range(4)}, names
xs = [e for e in ev if e.get("ph") == "X"]
assert {e["pid"] for e in xs} == {0, 1, 2, 3}, "every rank has events"
ts = [e["ts"] for e in xs]
assert all(a <= b for a, b in zip(ts, ts[1:])), "timestamps not in order"
# Each rank's events, as written, moved by its own offset, and none lost.
for r in range(4):
    f = json.load(open("%s/t.%d.json" % (d, r)))
    od = f["otherData"]
    assert od["rank"] == r and od["ranks"] == 4
    assert od["clock_offset_us"] == 0.0, "one node shares a clock: offset %s" % od["clock_offset_us"]
    mine = sorted(e["ts"] for e in f["traceEvents"] if e.get("ph") == "X")
    merged = sorted(e["ts"] for e in xs if e["pid"] == r)
    assert len(mine) == len(merged) == od["events"] > 0, (len(mine), len(merged), od["events"])
    assert all(abs(a + od["clock_offset_us"] - b) < 1e-3 for a, b in zip(mine, merged))
# Collectives overlap in time across ranks on the aligned clock: the first
# allreduce completes on every rank within a window smaller than the run.
done = {}
for e in xs:
    if e.get("cat") == "complete" and e["pid"] not in done:
        done[e["pid"]] = e["ts"] + e["dur"]
span = max(ts) - min(ts)
assert max(done.values()) - min(done.values()) < span, (done, span)
print("merge: 4 tracks, %d events, %.0f us" % (len(xs), span))
PY

# 2. Offsets measured on every rank: true offset is 0 on one node, so the
#    measured one is within half its round trip (plus clock granularity).
run "$tmp/b" WEFT_TRACE_CLOCK=measure
check "$tmp/b" <<'PY'
import json, sys
for r in range(4):
    od = json.load(open("%s/t.%d.json" % (sys.argv[1], r)))["otherData"]
    off, rtt = od["clock_offset_us"], od["clock_rtt_us"]
    assert od["clock_sync"] == "measured"
    if r == 0:
        assert off == 0 and rtt == 0
    else:
        assert rtt > 0 and abs(off) <= rtt / 2 + 1.0, (r, off, rtt)
PY

# 3. Bounded: 1024 events per rank; "first" keeps the start, "last" the end.
run "$tmp/first" WEFT_TRACE_EVENTS=1024 WEFT_TRACE_KEEP=first
run "$tmp/last" WEFT_TRACE_EVENTS=1024 WEFT_TRACE_KEEP=last
run "$tmp/all"
check "$tmp" <<'PY'
import collections, json, sys
d = sys.argv[1]
def seqs(f):
    """Sequence numbers of the operations issued on the busiest communicator."""
    iss = [e for e in f["traceEvents"] if e.get("cat") == "issue"]
    tid = collections.Counter(e["tid"] for e in iss).most_common(1)[0][0]
    return [e["args"]["seq"] for e in iss if e["tid"] == tid]
for r in range(4):
    full, first, last = (json.load(open("%s/%s/t.%d.json" % (d, k, r)))
                         for k in ("all", "first", "last"))
    n = full["otherData"]["events"]
    assert n > 1024 and full["otherData"]["dropped"] == 0, "the run must overfill 1024 events (%d)" % n
    for f, keep in ((first, "first"), (last, "last")):
        od = f["otherData"]
        assert od["capacity"] == 1024 and od["keep"] == keep, od
        assert 900 < od["events"] <= 1024, od
        assert len([e for e in f["traceEvents"] if e.get("ph") == "X"]) == od["events"]
    assert first["otherData"]["dropped"] > 0 and first["otherData"]["overwritten"] == 0
    assert last["otherData"]["overwritten"] > 0
    # The same program issues the same operations in every run: "first"
    # keeps the earliest of them, "last" the latest.
    s_full, s_first, s_last = seqs(full), seqs(first), seqs(last)
    assert min(s_first) == min(s_full) and max(s_first) < max(s_full), (r, "first")
    assert max(s_last) == max(s_full) and min(s_last) > min(s_full), (r, "last")
print("bounded: first and last keep 1024 events of %d" % n)
PY

# 4. merge refuses files of different runs and a rank given twice.
rc=0
"$py" "$tool" merge "$tmp/a/t.0.json" "$tmp/b/t.1.json" -o "$tmp/x.json" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "different runs" "$tmp/err" || err "mixed runs: exit $rc"
rc=0
"$py" "$tool" merge "$tmp/a/t.0.json" "$tmp/a/t.0.json" -o "$tmp/x.json" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "rank 0 is also in" "$tmp/err" || err "a rank twice: exit $rc"
rc=0
"$py" "$tool" merge "$tmp/none" -o "$tmp/x.json" 2> "$tmp/err" || rc=$?
[ "$rc" = 1 ] || err "no files: exit $rc"

[ "$nerr" = 0 ] && echo "test_trace: ok"
exit $((nerr > 0))
