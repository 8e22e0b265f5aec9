#!/usr/bin/env python3
"""check_obs.py - check the files test_profile wrote under WEFT_PROFILE/WEFT_TRACE.

  check_obs.py NRANKS PROFILE.json TRACE_PREFIX DUMP_PREFIX

Profile: valid JSON, the CSV beside it has the same rows, and per rank the
call counts per (op, algorithm, bucket) of test_profile.c's known sequence.
Trace: TRACE_PREFIX.RANK.json per rank is valid JSON (Chrome/Perfetto
{"traceEvents": [...]}, ph X/M, ts/dur numbers in us, pid = rank); every
operation (tid, seq) has exactly one issue, one start and one complete event,
the start and complete spans are ordered, and every operation that ran has at
least one step event.
Exit 0 when all holds, 1 otherwise (each failure printed).
"""
import csv
import json
import sys
from collections import Counter, defaultdict

fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
    return cond


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fails.append("%s: not readable JSON: %s" % (path, e))
        return None


def cells(entries, rank):
    out = {}
    for e in entries:
        if e["rank"] == rank:
            out[(e["op"], e["algorithm"], e["bucket_bytes"])] = e
    return out


def check_profile(nranks, path, dump_prefix):
    prof = load(path)
    if prof is None:
        return
    check(prof.get("weft_profile") == 1, "profile: no weft_profile: 1 marker")
    check(prof.get("ranks") == nranks, "profile: ranks %r, expected %d" % (prof.get("ranks"), nranks))
    entries = prof.get("entries", [])
    for key in ("rank", "op", "algorithm", "bucket_bytes", "calls", "bytes", "total_us", "mean_us",
                "min_us", "max_us", "wait_us", "waits"):
        check(all(key in e for e in entries), "profile: an entry lacks %s" % key)
    csvp = path[:-5] + ".csv" if path.endswith(".json") else path + ".csv"
    try:
        with open(csvp, newline="") as f:
            rows = list(csv.DictReader(f))
        check(len(rows) == len(entries), "profile CSV has %d rows, JSON %d" % (len(rows), len(entries)))
    except OSError as e:
        fails.append("profile CSV %s: %s" % (csvp, e))
    for r in range(nranks):
        c = cells(entries, r)
        rd4 = c.get(("allreduce", "recursive_doubling", 4))
        if check(rd4 is not None, "rank %d: no allreduce/recursive_doubling/4 B cell" % r):
            check(rd4["calls"] == 3, "rank %d: rd 4 B calls %s, expected 3" % (r, rd4["calls"]))
            check(rd4["bytes"] == 12, "rank %d: rd 4 B bytes %s, expected 12" % (r, rd4["bytes"]))
            check(0 <= rd4["min_us"] <= rd4["mean_us"] <= rd4["max_us"], "rank %d: min<=mean<=max" % r)
            check(abs(rd4["mean_us"] * 3 - rd4["total_us"]) <= 0.01 + 1e-6 * rd4["total_us"],
                  "rank %d: mean * calls != total" % r)
            check(rd4["waits"] == 3, "rank %d: rd 4 B waits %s, expected 3 (blocking calls)" % (r, rd4["waits"]))
        check(("allreduce", "recursive_doubling", 8) not in c,
              "rank %d: the 8 B allreduce made while profiling was off was counted" % r)
        ring = c.get(("allreduce", "ring", 4096))
        if check(ring is not None, "rank %d: no allreduce/ring/4096 B cell" % r):
            check(ring["calls"] == 2, "rank %d: ring 4096 B calls %s, expected 2" % (r, ring["calls"]))
        b16 = [e for k, e in c.items() if k[0] == "allreduce" and k[2] == 16]
        check(sum(e["calls"] for e in b16) == 1, "rank %d: iallreduce 12 B: bucket 16 calls != 1" % r)
        check(sum(e["waits"] for e in b16) == 1, "rank %d: iallreduce 12 B: waits != 1" % r)
        bc = [e for k, e in c.items() if k[0] == "bcast" and k[2] == 128]
        check(sum(e["calls"] for e in bc) == 1, "rank %d: bcast 100 B: bucket 128 calls != 1" % r)
        # the mid-run dump holds this rank's table at that point: rd and ring, nothing later
        if dump_prefix:
            d = load("%s.%d.json" % (dump_prefix, r))
            if d is not None:
                dc = cells(d.get("entries", []), r)
                check(dc.get(("allreduce", "recursive_doubling", 4), {}).get("calls") == 3,
                      "rank %d: dump: rd 4 B calls != 3" % r)
                check(dc.get(("allreduce", "ring", 4096), {}).get("calls") == 2,
                      "rank %d: dump: ring 4096 B calls != 2" % r)
                check(not any(k[0] == "bcast" for k in dc), "rank %d: dump has the later bcast" % r)


def check_trace(nranks, prefix):
    for r in range(nranks):
        path = "%s.%d.json" % (prefix, r)
        tr = load(path)
        if tr is None:
            continue
        ev = tr.get("traceEvents") if isinstance(tr, dict) else None
        if not check(isinstance(ev, list) and ev, "%s: no traceEvents list" % path):
            continue
        check(tr.get("otherData", {}).get("dropped") == 0, "%s: events were dropped" % path)
        phases = defaultdict(Counter)
        spans = defaultdict(dict)
        algo = {}
        for e in ev:
            ok = check(e.get("ph") in ("X", "M"), "%s: event with ph %r" % (path, e.get("ph")))
            ok = ok and check(e.get("pid") == r, "%s: pid %r is not the rank" % (path, e.get("pid")))
            ok = ok and check(isinstance(e.get("tid"), int) and isinstance(e.get("name"), str),
                              "%s: bad tid/name" % path)
            if not ok or e["ph"] == "M":
                continue
            if not check(isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))
                         and e["dur"] >= 0, "%s: bad ts/dur in %r" % (path, e)):
                continue
            a = e.get("args", {})
            if "seq" not in a:
                continue  # wait / stream spans
            key = (e["tid"], a["seq"])
            phases[key][e["cat"]] += 1
            spans[key].setdefault(e["cat"], e)
            algo[key] = (a["op"], a["algorithm"])
        check(len(phases) >= 7, "%s: %d operations traced, expected at least 7" % (path, len(phases)))
        for key, cnt in phases.items():
            for cat in ("issue", "start", "complete"):
                check(cnt[cat] == 1, "%s: op %r has %d '%s' events" % (path, key, cnt[cat], cat))
            s, c = spans[key].get("start"), spans[key].get("complete")
            if s and c:
                check(s["ts"] + s["dur"] <= c["ts"] + 0.002, "%s: op %r completes before it starts" % (path, key))
            if c and c.get("args", {}).get("status") == 0:
                check(cnt["step"] >= 1, "%s: %s op %r ran but has no step event" % (path, algo[key], key))
        n_ar = sum(1 for k in phases if algo[k][0] == "allreduce")
        check(n_ar >= 7, "%s: %d allreduce ops traced, expected >= 7" % (path, n_ar))


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    nranks = int(sys.argv[1])
    check_profile(nranks, sys.argv[2], sys.argv[4])
    check_trace(nranks, sys.argv[3])
    for f in fails:
        print("FAIL: " + f)
    print("check_obs: %s (%d failures)" % ("ok" if not fails else "FAILED", len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
