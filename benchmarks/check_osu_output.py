#!/usr/bin/env python3
"""check_osu_output.py - runs a Weft benchmark with --osu and reads its output
the way a parser written for OSU OMB 7 does, failing on anything such a
parser would trip on; also checks the algbw/busbw columns of the CSV.

  check_osu_output.py MPIEXEC PROGRAM KIND
      KIND: allreduce | bcast | alltoall | reduce_scatter | allgather | allgatherv |
            alltoallv | p2p
            | iallreduce (weft_osu_iallreduce) | overlap (mpi_overlap: OSU's
            non-blocking tables)
            | floor-allreduce | floor-reduce_scatter | floor-allgather: not
            OSU's format but the default comparison with --floor (the
            memory floor's columns in the table and the CSV); PROGRAM is
            weft_osu_allreduce, or weft_osu_coll (run with --coll) or the
            collective's own weft_osu_<collective>

The parser knows only OMB's format (c/util/osu_util*.c of OMB 7): a table is
a title line "# OSU MPI <Name> Test v7.<n>", other '#' comment lines, the
column line starting "# Size" (or "# Avg Latency(us)", "# Overall(us)" for the
barriers, whose rows have no size) whose
names are right-aligned in 20-character fields after a 10-character size
field ("Iterations" in 12), then data lines of whitespace-separated numbers,
as many as there are columns, the validation column "Pass" or "Fail".
Exit 0 when every check holds; 1 with the failed checks listed.
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

TITLE = re.compile(r"^# OSU MPI (?P<name>.+) Test v7\.\d+$")
OSU_TITLES = {
    "allreduce": "Allreduce Latency",
    "bcast": "Broadcast Latency",
    "alltoall": "All-to-All Personalized Exchange Latency",
    "reduce_scatter": "Reduce_scatter Latency",
    "allgather": "Allgather Latency",
    "allgatherv": "Allgatherv Latency",
    "alltoallv": "All-to-Allv Personalized Exchange Latency",
}
RANKS = 2
ITERS = 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def header_fields(line):
    """OMB's column line cut at its fixed widths: 10 for the size, 20 per
    figure, 12 for "Iterations"."""
    fields, pos = [], 0
    if line.startswith("# Size"):
        fields.append(line[:10].strip())
        pos = 10
    else:  # no size column (barriers): the first name, "# Avg Latency(us)" or "# Overall(us)"
        pos = line.index(")") + 1
        fields.append(line[:pos])
    while pos < len(line):
        width = 12 if line[pos:pos + 12].strip() == "Iterations" else 20
        fields.append(line[pos:pos + width].strip())
        pos += width
    return fields


def parse_tables(text):
    """[(title name, comment lines, column names, rows)] as an OMB parser
    reads them: a new table at each title line."""
    tables = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = TITLE.match(line)
        if m:
            tables.append({"name": m.group("name"), "comments": [], "columns": None, "rows": []})
            continue
        if not check(tables, "a line before any OSU title line: %r" % line):
            return tables
        t = tables[-1]
        if line.startswith("#"):
            if line.startswith(("# Size", "# Avg Latency(us)", "# Overall(us)")):
                cols = header_fields(line)
                check(cols == re.split(r"\s{2,}", line.strip()),
                      "column line not in OMB's fixed widths: %r" % line)
                t["columns"] = cols
            else:
                t["comments"].append(line)
            continue
        if not check(t["columns"] is not None, "a data line before the column line: %r" % line):
            continue
        tokens = line.split()
        if not check(len(tokens) == len(t["columns"]),
                     "%d values for %d columns: %r" % (len(tokens), len(t["columns"]), line)):
            continue
        row = {}
        for name, tok in zip(t["columns"], tokens):
            if name == "Validation":
                check(tok in ("Pass", "Fail"), "validation %r" % tok)
                row[name] = tok
            elif name in ("# Size", "Iterations"):
                check(re.fullmatch(r"\d+", tok) is not None, "%s not an integer: %r" % (name, tok))
                row[name] = int(tok) if tok.isdigit() else -1
            else:
                check(re.fullmatch(r"\d+\.\d\d", tok) is not None,
                      "%s not a number with 2 decimals: %r" % (name, tok))
                try:
                    row[name] = float(tok)
                except ValueError:
                    row[name] = float("nan")
        t["rows"].append(row)
    return tables


def run(mpiexec, program, args, csv_path=None, skip_call=None, quiet=True):
    cmd = [mpiexec, "-n", str(RANKS), program] + args + (["--quiet"] if quiet else [])
    if csv_path:
        cmd += ["--csv", csv_path]
    env = dict(os.environ)
    if skip_call is not None:  # bench_common's test hook: no rank makes that iteration's call
        env["BENCH_OSU_SKIP_CALL"] = str(skip_call)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240,
                       env=env)
    want = 1 if skip_call is not None else 0
    if not check(p.returncode == want, "%s exited %d, want %d: %s" % (" ".join(cmd), p.returncode, want,
                                                                      p.stderr[-2000:])):
        return ""
    return p.stdout


def check_fails(mpiexec, program, args, what):
    """-c must catch a call that did not happen: Fail, OSU's error line, exit 1."""
    out = run(mpiexec, program, args, skip_call=3)
    tables = parse_tables("\n".join(l for l in out.splitlines() if not l.startswith("DATA VALIDATION")))
    check(tables and tables[-1]["rows"] and tables[-1]["rows"][-1].get("Validation") == "Fail",
          "%s: a skipped call passed validation:\n%s" % (what, out))
    check(tables and len(tables[-1]["rows"]) == 1, "%s: rows after the failed size" % what)
    check("DATA VALIDATION ERROR" in out, "%s: no DATA VALIDATION ERROR line" % what)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def sizes(lo, hi):
    out = []
    while lo <= hi:
        out.append(lo)
        lo *= 2
    return out


def check_coll(mpiexec, program, kind, tmp):
    n = RANKS
    factor = {"allreduce": 2.0 * (n - 1) / n, "bcast": 1.0}.get(kind, (n - 1) / n)
    # the -m size is one rank's block of these; --osu's reduce_scatter size is the whole vector (OSU's)
    blocks = n if kind in ("alltoall", "allgather", "reduce_scatter", "alltoallv", "allgatherv") else 1
    osu_blocks = 1 if kind == "reduce_scatter" else blocks
    want_sizes = sizes(8, 1024)
    # 1: the plain listing, OSU's two columns.
    out = run(mpiexec, program, ["--osu", "-m", "8:1024", "-i", str(ITERS), "-x", "2"])
    tables = parse_tables(out)
    if check(len(tables) == 1, "%s --osu: %d tables, want 1" % (kind, len(tables))):
        t = tables[0]
        check(t["name"] == OSU_TITLES[kind], "title %r, want %r" % (t["name"], OSU_TITLES[kind]))
        check(t["columns"] == ["# Size", "Avg Latency(us)"], "columns %r" % t["columns"])
        check(any(c.startswith("# Datatype: MPI_FLOAT.") for c in t["comments"]), "no datatype line")
        check([r["# Size"] for r in t["rows"]] == want_sizes, "sizes %r" % [r["# Size"] for r in t["rows"]])
    # 2: -f and -c, and the CSV of the same run.
    path = os.path.join(tmp, kind + "-osu.csv")
    out = run(mpiexec, program, ["--osu", "-f", "-c", "-m", "8:1024", "-i", str(ITERS), "-x", "2"], path)
    tables = parse_tables(out)
    if check(len(tables) == 1, "%s --osu -f -c: %d tables" % (kind, len(tables))):
        t = tables[0]
        check(t["columns"] == ["# Size", "Avg Latency(us)", "Min Latency(us)", "Max Latency(us)",
                               "Iterations", "Validation"], "-f -c columns %r" % t["columns"])
        check(len(t["rows"]) == len(want_sizes), "-f -c: %d rows" % len(t["rows"]))
        for r in t["rows"]:
            check(r["Iterations"] == ITERS, "iterations %r, want %d" % (r["Iterations"], ITERS))
            check(r["Validation"] == "Pass", "validation %r at %d" % (r["Validation"], r["# Size"]))
            # the average over ranks lies between their minimum and maximum (2 decimals)
            check(r["Min Latency(us)"] - 0.01 <= r["Avg Latency(us)"] <= r["Max Latency(us)"] + 0.01,
                  "avg %r outside min %r, max %r" % (r["Avg Latency(us)"], r["Min Latency(us)"],
                                                     r["Max Latency(us)"]))
        rows = read_csv(path) if os.path.exists(path) else []
        check(len(rows) == len(t["rows"]), "--osu CSV rows %d" % len(rows))
        for c, r in zip(rows, t["rows"]):
            check(int(c["size_bytes"]) == r["# Size"] and abs(float(c["avg_us"]) - r["Avg Latency(us)"]) < 0.006,
                  "CSV row %r against the table's %r" % (c, r))
            us, total = float(c["avg_us"]), int(c["size_bytes"]) * osu_blocks
            check_bw(c, "", total, us, factor)
    check_fails(mpiexec, program, ["--osu", "-c", "-m", "8:64", "-i", str(ITERS), "-x", "2"], kind)
    # 3: the default comparison's CSV: algbw and busbw of both libraries.
    path = os.path.join(tmp, kind + ".csv")
    out = run(mpiexec, program, ["-m", "8:64", "-i", str(ITERS), "-x", "2", "-r", "3"], path)
    check("Weft/MPI" in out and "# OSU MPI" not in out, "the default output changed:\n" + out)
    rows = read_csv(path) if os.path.exists(path) else []
    check(len(rows) == 4, "default CSV rows %d" % len(rows))
    for c in rows:
        total = int(c["size_bytes"]) * blocks
        check_bw(c, "weft_", total, float(c["weft_us"]), factor)
        check_bw(c, "mpi_", total, float(c["mpi_us"]), factor)


def check_bw(row, prefix, total, us, factor):
    """nccl-tests: algbw = bytes / time (GB/s), busbw = algbw * factor."""
    alg, bus = float(row[prefix + "algbw_GBps"]), float(row[prefix + "busbw_GBps"])
    # the CSV's time has 3 decimals (+-0.0005 us), its bandwidths 6 significant digits
    lo, hi = total / (us + 0.0005) / 1e3, total / max(us - 0.0005, 1e-9) / 1e3
    check(lo * (1 - 1e-5) <= alg <= hi * (1 + 1e-5), "%salgbw %r, want %r (%r us)" % (prefix, alg, total / us / 1e3, us))
    check(abs(bus - alg * factor) <= 2e-5 * bus + 1e-9, "%sbusbw %r, want %r x %r" % (prefix, bus, alg, factor))


def check_p2p(mpiexec, program, tmp):
    out = run(mpiexec, program, ["--osu", "-c", "-m", "1:256", "-i", str(ITERS), "-x", "2", "-W", "4"])
    tables = parse_tables(out)
    if check(len(tables) == 2, "p2p --osu: %d tables, want latency and bandwidth" % len(tables)):
        for t, name, metric in zip(tables, ["Latency", "Bandwidth"], ["Latency (us)", "Bandwidth (MB/s)"]):
            check(t["name"] == name, "title %r, want %r" % (t["name"], name))
            check(t["columns"] == ["# Size", metric, "Validation"], "columns %r" % t["columns"])
            check([r["# Size"] for r in t["rows"]] == sizes(1, 256), "sizes %r" % [r["# Size"] for r in t["rows"]])
            for r in t["rows"]:
                check(r["Validation"] == "Pass", "%s validation %r" % (name, r["Validation"]))
                check(r[metric] >= 0, "%s %r negative" % (name, r[metric]))  # 2 decimals: 0.00 on a slow run
    check_fails(mpiexec, program, ["--osu", "-c", "--mode", "lat", "-m", "8:64", "-i", str(ITERS), "-x", "2"],
                "p2p latency")
    check_fails(mpiexec, program, ["--osu", "-c", "--mode", "bw", "-m", "8:64", "-i", str(ITERS), "-x", "2",
                                   "-W", "2"], "p2p bandwidth")
    # -f: OSU's point-to-point tests have no full listing; one table, its columns unchanged
    out = run(mpiexec, program, ["--osu", "-f", "--mode", "lat", "-m", "4:16", "-i", str(ITERS), "-x", "2"])
    tables = parse_tables(out)
    if check(len(tables) == 1, "p2p --osu --mode lat: %d tables" % len(tables)):
        check(tables[0]["columns"] == ["# Size", "Latency (us)"], "columns %r" % tables[0]["columns"])
        check(len(tables[0]["rows"]) == 3, "rows %d" % len(tables[0]["rows"]))


DEFAULT_CSV = ["size_bytes", "weft_us", "mpi_us", "ratio", "algorithm", "weft_algbw_GBps",
               "weft_busbw_GBps", "mpi_algbw_GBps", "mpi_busbw_GBps"]
FLOOR_COLUMNS = ["# Size", "Avg Latency(us)", "MPI Latency(us)", "Weft/MPI", "Floor(us)", "Weft/Floor",
                 "Algorithm"]


def ratio_ok(ratio, num, den, digits, ratio_digits):
    """ratio, printed with ratio_digits decimals, is num / den of two figures
    printed with `digits` decimals (each off by up to half a unit)."""
    e, er = 0.5 * 10 ** -digits, 0.5 * 10 ** -ratio_digits
    if den - e <= 0:
        return False
    return (num - e) / (den + e) - er <= ratio <= (num + e) / (den - e) + er


def check_floor(mpiexec, program, coll, tmp):
    """--floor on 2 ranks, 64 KiB to 256 KiB, a short budget: the header line
    saying what the floor times, the columns Floor(us) and Weft/Floor in the
    table and floor_us, weft_floor_ratio at the CSV's end, numeric, positive,
    the ratio the quotient of the figures printed beside it; without --floor
    the output is the default one; --floor with --osu and on a collective
    without a floor is a usage error (exit 2). The --floor run also gives
    --thp (2 MiB-aligned buffers advised MADV_HUGEPAGE), whose '# Pages:'
    line says so; the default run's says it was not given."""
    opts = ["--coll", coll] if os.path.basename(program) == "weft_osu_coll" else []
    base = opts + ["-m", "64K:256K", "-r", "3", "--budget", "0.02"]
    want_sizes = sizes(65536, 262144)
    path = os.path.join(tmp, coll + "-floor.csv")
    out = run(mpiexec, program, base + ["--floor", "--thp"], path)
    lines = out.splitlines()
    pages = [l for l in lines if l.startswith("# Pages:")]
    check(len(pages) == 1 and "--thp" in pages[0] and "transparent huge pages:" in pages[0],
          "%s --thp: the '# Pages:' line does not say so: %r" % (coll, pages))
    floor = [l for l in lines if l.startswith("# Floor:")]
    reduction = coll in ("allreduce", "reduce_scatter")
    what = {"allreduce": "the n-byte vector", "reduce_scatter": "p blocks", "allgather": "p blocks"}[coll]
    check(len(floor) == 1 and ("c[i] = a[i] + b[i] in float32" in floor[0]) == reduction
          and ("memcpy" in floor[0]) != reduction and what in floor[0],
          "%s --floor: the '# Floor:' line does not say what is timed: %r" % (coll, floor))
    cols = [re.split(r"\s{2,}", l.strip()) for l in lines if l.startswith("# Size")]
    check(cols == [FLOOR_COLUMNS], "%s --floor: column line %r, want %r" % (coll, cols, FLOOR_COLUMNS))
    rows = [l.split() for l in lines if l.strip() and not l.startswith("#")]
    check([int(r[0]) if r[0].isdigit() else -1 for r in rows] == want_sizes,
          "%s --floor: sizes %r" % (coll, [r[0] for r in rows]))
    for r in rows:
        if not check(len(r) == len(FLOOR_COLUMNS), "%s --floor: row %r" % (coll, r)):
            continue
        if not check(all(re.fullmatch(r"\d+\.\d\d", x) for x in r[1:6]),
                     "%s --floor: not numbers with 2 decimals: %r" % (coll, r)):
            continue
        weft, mpi, wm, fl, wf = (float(x) for x in r[1:6])
        check(fl > 0, "%s --floor: floor %r not positive" % (coll, fl))
        check(ratio_ok(wm, weft, mpi, 2, 2), "%s: Weft/MPI %r is not %r / %r" % (coll, wm, weft, mpi))
        check(ratio_ok(wf, weft, fl, 2, 2), "%s: Weft/Floor %r is not %r / %r" % (coll, wf, weft, fl))
    with open(path) if os.path.exists(path) else open(os.devnull) as f:
        header = next((l.strip().split(",") for l in f if not l.startswith("#")), [])
    check(header == DEFAULT_CSV + ["floor_us", "weft_floor_ratio"], "%s --floor: CSV header %r" % (coll, header))
    crow = read_csv(path) if os.path.exists(path) else []
    check(len(crow) == len(rows), "%s --floor: %d CSV rows for %d table rows" % (coll, len(crow), len(rows)))
    for c, r in zip(crow, rows):
        try:
            weft, fl, wf = float(c["weft_us"]), float(c["floor_us"]), float(c["weft_floor_ratio"])
        except (KeyError, TypeError, ValueError):
            check(False, "%s --floor: CSV row not numeric: %r" % (coll, c))
            continue
        check(fl > 0 and ratio_ok(wf, weft, fl, 3, 4),
              "%s --floor: CSV weft_floor_ratio %r is not %r / %r" % (coll, wf, weft, fl))
        check(len(r) == len(FLOOR_COLUMNS) and abs(fl - float(r[4])) < 0.006,
              "%s --floor: CSV floor_us %r against the table's %r" % (coll, fl, r[4] if len(r) > 4 else None))
    # Without --floor: the default output, the default CSV.
    path = os.path.join(tmp, coll + "-default.csv")
    out = run(mpiexec, program, base, path)
    check("Floor" not in out and "Weft/MPI" in out, "%s: the default output changed:\n%s" % (coll, out))
    check("# Pages: buffers as aligned_alloc gives them" in out,
          "%s: no '# Pages:' line saying --thp was not given:\n%s" % (coll, out))
    with open(path) if os.path.exists(path) else open(os.devnull) as f:
        header = next((l.strip().split(",") for l in f if not l.startswith("#")), [])
    check(header == DEFAULT_CSV, "%s: default CSV header %r" % (coll, header))
    # Usage errors: with --osu; a collective without a floor.
    bad = [base + ["--floor", "--osu"]]
    if opts:
        bad.append(["--coll", "gather", "--floor", "-m", "64K:64K"])
    for args in bad:
        cmd = [mpiexec, "-n", "1", program] + args
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        check(p.returncode == 2 and "--floor" in p.stderr,
              "%s exited %d, want 2 with a message naming --floor: %s" % (" ".join(cmd), p.returncode,
                                                                         p.stderr[-500:]))


NBC = ["# Size", "Overall(us)", "Compute(us)", "Pure Comm.(us)", "Overlap(%)"]
NBC_FULL = ["# Size", "Overall(us)", "Compute(us)", "Coll. Init(us)", "MPI_Test(us)", "MPI_Wait(us)",
            "Pure Comm.(us)", "Min Comm.(us)", "Max Comm.(us)", "Overlap(%)"]


def check_iallreduce(mpiexec, program):
    """weft_osu_iallreduce --osu: osu_iallreduce's table, -f and -c."""
    for full in (False, True):
        args = ["--osu", "-m", "8:64", "-i", str(ITERS), "-x", "2"] + (["-f", "-c"] if full else [])
        tables = parse_tables(run(mpiexec, program, args))
        if not check(len(tables) == 1, "iallreduce --osu: %d tables" % len(tables)):
            continue
        t = tables[0]
        check(t["name"] == "Non-blocking Allreduce Latency", "title %r" % t["name"])
        check("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait" in t["comments"], "no '# Overall' line")
        cols = NBC_FULL + ["Validation"] if full else NBC
        check(t["columns"] == cols, "columns %r, want %r" % (t["columns"], cols))
        check([r["# Size"] for r in t["rows"]] == sizes(8, 64), "sizes %r" % [r["# Size"] for r in t["rows"]])
        for r in t["rows"]:
            check(0 <= r["Overlap(%)"] <= 100, "overlap %r" % r["Overlap(%)"])
            if full:
                check(r["Validation"] == "Pass", "validation %r" % r["Validation"])
                check(r["Min Comm.(us)"] - 0.01 <= r["Pure Comm.(us)"] <= r["Max Comm.(us)"] + 0.01,
                      "pure %r outside min/max" % r["Pure Comm.(us)"])
    check_fails(mpiexec, program, ["--osu", "-c", "-m", "8:64", "-i", str(ITERS), "-x", "2"], "iallreduce")


def check_overlap(mpiexec, program):
    """mpi_overlap --osu: OSU's osu_ialltoall and osu_ibarrier tables."""
    base = ["--osu", "--compute", "device", "--entry", "mpi", "-m", "4K:8K", "-i", "3", "-x", "1"]
    want = {False: NBC, True: NBC_FULL}
    for full in (False, True):
        out = run(mpiexec, program, base + ["--ops", "ialltoall,ibarrier"] + (["-f"] if full else []),
                  quiet=False)  # mpi_overlap prints no progress lines
        tables = parse_tables(out)
        if not check(len(tables) == 2, "mpi_overlap --osu: %d tables, want 2" % len(tables)):
            continue
        for t, name, sized in zip(tables, ["Non-blocking All-to-All Latency", "Non-blocking Barrier Latency"],
                                  [True, False]):
            check(t["name"] == name, "title %r, want %r" % (t["name"], name))
            check("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait" in t["comments"],
                  "no '# Overall = ...' line")
            cols = want[full] if sized else ["# Overall(us)"] + want[full][2:]
            check(t["columns"] == cols, "columns %r, want %r" % (t["columns"], cols))
            check(len(t["rows"]) == (2 if sized else 1), "%s: %d rows" % (name, len(t["rows"])))
            for r in t["rows"]:
                check(0 <= r["Overlap(%)"] <= 100, "overlap %r" % r["Overlap(%)"])
                if full:
                    check(r["MPI_Test(us)"] == 0, "MPI_Test(us) %r" % r["MPI_Test(us)"])
                    check(r["Min Comm.(us)"] - 0.01 <= r["Pure Comm.(us)"] <= r["Max Comm.(us)"] + 0.01,
                          "pure %r outside min/max" % r["Pure Comm.(us)"])


def selftest():
    """The parser must reject what an OMB parser would not read."""
    good = ("\n# OSU MPI Allreduce Latency Test v7.4\n# Datatype: MPI_FLOAT.\n"
            "%-10s%20s%20s\n%-10d%20.2f%20s\n" % ("# Size", "Avg Latency(us)", "Validation", 4, 1.5, "Pass"))
    global failures
    parse_tables(good)
    ok = not failures
    for bad in [good.replace("v7.4", "v6.1"),                       # not OMB 7
                good.replace("    1.50", "    1.50  2.00"),         # a value too many
                good.replace("Pass", "Maybe"),                      # not Pass/Fail
                good.replace("# Size         Avg", "# Size Avg")]:          # not OMB's widths
        failures = []
        parse_tables(bad)
        ok = ok and bool(failures)
    failures = []
    return ok


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    mpiexec, program, kind = argv[1:]
    if not selftest():
        print("check_osu_output.py: the parser's own check failed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "p2p":
            check_p2p(mpiexec, program, tmp)
        elif kind == "overlap":
            check_overlap(mpiexec, program)
        elif kind == "iallreduce":
            check_iallreduce(mpiexec, program)
        elif kind in ("floor-allreduce", "floor-reduce_scatter", "floor-allgather"):
            check_floor(mpiexec, program, kind[len("floor-"):], tmp)
        elif kind in OSU_TITLES:
            check_coll(mpiexec, program, kind, tmp)
        else:
            print("unknown KIND %r" % kind, file=sys.stderr)
            return 2
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    if not failures and kind.startswith("floor-"):
        print("%s: --floor columns in the table and the CSV, numeric, ratios as printed" % kind)
    elif not failures:
        print("%s: OSU OMB 7 output read back, -f/-c columns and CSV bandwidths as defined" % kind)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
