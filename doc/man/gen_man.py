#!/usr/bin/env python3
"""gen_man.py - Weft's man pages, generated from the public headers and the
configuration table, so that the synopsis of every page is the prototype the
headers declare (a function added to a header gets a page without an edit
here: it joins the family its name matches, else weft_misc(3)).

  gen_man.py --list   ROOT                 print the file names it writes
  gen_man.py --outdir DIR --version V ROOT write them into DIR

Section 3: one page per function family, and for every other function of
the family a one-line page that includes it (.so), so that `man
weft_iallreduce` shows the allreduce page. Section 7: weft(7), the overview
and every WEFT_* variable (from doc/config.md's reference, generated
from lib/config.c's table). Section 1: the programs
(doc/man/programs/*.1, written by hand, copied).
"""
import os
import re
import sys

HEADERS = ["weft.h", "weft_mpi.h", "weft_stream.h", "weft_cuda.h", "weft_halo.h"]

# (page, header to include, rule: function name -> bool, summary, description)
FAMILIES = [
    ("weft_init", "weft.h",
     lambda n: n in ("weft_init", "weft_finalize", "weft_initialized", "weft_version",
                     "weft_version_string"),
     "initialise and finalise Weft, the library's version",
     "weft_init reads the WEFT_* environment once (see weft(7)): an unknown WEFT_ variable is "
     "warned about with the closest known name, a malformed value or an output path "
     "(WEFT_PROFILE, WEFT_TRACE) that cannot be written fails the call. weft_init is collective "
     "over MPI_COMM_WORLD."),
    ("weft_strerror", "weft.h",
     lambda n: n in ("weft_strerror", "weft_status_name") or n.endswith("_name") or
     n in ("weft_datatype_size", "weft_algo_from_name"),
     "status strings and the names of datatypes, operations, algorithms, transports",
     "Constant strings, never to be freed. weft_algo_from_name parses a name as "
     "weft_algo_name prints it."),
    ("weft_comm_create", "weft_mpi.h",
     lambda n: n.startswith("weft_comm_") or n == "weft_query_algo",
     "communicators: creation from an MPI communicator, queries, forced algorithms",
     "A Weft communicator duplicates an MPI communicator (errors returned, never fatal) and may "
     "be bound to a stream. weft_comm_split and weft_comm_create_group make communicators of "
     "some ranks: the first is collective over the parent, the second over the listed ranks "
     "only. weft_comm_set_algo forces an algorithm; weft_query_algo tells which "
     "algorithm a call would really run (a forced NCCL on host buffers runs the host cost "
     "model's choice, and the query says so)."),
    ("weft_wait", "weft.h", lambda n: n in ("weft_wait", "weft_test", "weft_waitall"),
     "complete nonblocking operations",
     "A request is released when it completes through weft_wait, weft_test or weft_waitall."),
    ("weft_allreduce", "weft.h", lambda n: n in ("weft_allreduce", "weft_iallreduce"),
     "blocking and nonblocking allreduce",
     "The algorithm is chosen per call (WEFT_ALLREDUCE_ALGO, weft_comm_set_algo, the tuning "
     "table, else the cost model). The nonblocking form returns at once; Weft's engine thread "
     "progresses the operation while the caller computes."),
    ("weft_collectives", "weft.h",
     lambda n: re.match(r"weft_i?(reduce_scatterv?|allgatherv?|bcast|reduce|alltoallv?|gatherv?|"
                        r"scatterv?|barrier)$", n) is not None,
     "the other collectives: reduce_scatter, allgather, bcast, reduce, alltoall, gather, "
     "scatter, barrier, and the vector forms allgatherv, alltoallv, gatherv, scatterv, "
     "reduce_scatterv",
     "Host buffers. Each has a blocking form and a nonblocking one (prefix i) that returns a "
     "request. The vector forms take per-rank counts and displacements in elements (size_t), "
     "read during the call only (doc/api.md)."),
    ("weft_send", "weft.h",
     lambda n: n in ("weft_send", "weft_isend", "weft_recv", "weft_irecv", "weft_sendrecv"),
     "point-to-point messages through Weft's engine",
     "Ordered with the collectives issued on the same communicator."),
    ("weft_profile_enable", "weft.h", lambda n: n.startswith("weft_profile_"),
     "the per-operation, per-size profiler",
     "WEFT_PROFILE=path turns the profiler on at weft_init and writes it at weft_finalize "
     "(doc/observability.md)."),
    ("weft_stream_create_host", "weft_stream.h",
     lambda n: n.startswith("weft_stream_") or n == "weft_cuda_available",
     "streams: host streams and CUDA streams a communicator is bound to",
     "A collective issued on a stream-bound communicator starts after the work already on the "
     "stream; later work waits for it. The CUDA functions return WEFT_ERR_UNSUPPORTED in a "
     "build without CUDA (doc/streams.md, doc/gpu.md)."),
    ("weft_halo_plan_create", "weft_halo.h", lambda n: n.startswith("weft_halo_"),
     "halo exchange of spatially decomposed tensors",
     "A plan describes the local block, halo widths and neighbours; start/wait or exchange "
     "move the borders (doc/halo.md)."),
    ("weft_misc", "weft.h", lambda n: True, "other functions", "Functions of the public headers "
     "not listed in another family."),
]


# The options every benchmark shares (benchmarks/bench_common.c, bench_parse).
BENCH_OPTIONS = r""".TP
\fB\-m\fR \fIMIN:MAX\fR | \fIMAX\fR
message sizes in bytes, doubling from MIN; suffixes K, M, G (KiB, MiB, GiB)
.TP
\fB\-i\fR \fIITERS\fR, \fB\-x\fR \fIWARMUP\fR
timed and warm\-up iterations per size and variant (default: OSU's counts, capped by \-\-budget)
.TP
\fB\-r\fR, \fB\-\-rounds\fR \fIR\fR
interleaved rounds; the median over rounds is reported (default 5)
.TP
\fB\-\-budget\fR \fISECONDS\fR
time per size and variant when \-i is not given (default 0.4)
.TP
\fB\-T\fR \fITYPE\fR
float, double, int, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16
.TP
\fB\-a\fR \fIALGO\fR
force an algorithm (weft_comm_set_algo); an unknown name is refused with the valid ones listed
.TP
\fB\-\-csv\fR \fIFILE\fR; \fB\-\-quiet\fR
also write the figures as CSV; no progress lines
.TP
\fB\-h\fR, \fB\-\-help\fR; \fB\-V\fR, \fB\-v\fR, \fB\-\-version\fR
usage; version and build options
.PP
OSU OMB 7's spellings are taken too: \fB\-\-message\-size\fR (also \fIMIN\fR: and :\fIMAX\fR),
\fB\-\-iterations\fR, \fB\-\-warmup\fR, \fB\-\-type\fR (and its names mpi_char, mpi_int,
mpi_float).
"""

# The --osu mode of weft_osu_allreduce, weft_osu_coll and weft_osu_p2p
# (benchmarks/bench_common.h), put in place of @OSU_OPTIONS@.
OSU_OPTIONS = r""".TP
\fB\-\-osu\fR[=\fIweft\fR|\fImpi\fR]
print what OSU OMB 7's own benchmark prints, in its layout, for a parser written for OMB: a
blank line, the title (\(lq# OSU MPI Allreduce Latency Test v7.4\(rq), \(lq# Datatype:
MPI_FLOAT.\(rq, the column line \(lq# Size  Avg Latency(us)\(rq, then one row per size (size
in 10 columns, figures in 20 with 2 decimals). It times Weft's call (or MPI's, \fB=mpi\fR)
OSU's way: each iteration alone between barriers, each rank's mean over the iterations, their
sum over ranks divided by the number of ranks, the minimum and the maximum over ranks. The
default output (Weft beside MPI) is unchanged without it.
.TP
\fB\-f\fR, \fB\-\-full\fR
with \fB\-\-osu\fR: also the columns Min Latency(us), Max Latency(us) (over ranks) and
Iterations
.TP
\fB\-c\fR, \fB\-\-validation\fR
with \fB\-\-osu\fR: each iteration's inputs differ; each rank checks its result against the
value computed from every rank's inputs (the column Validation, Pass or Fail); a failed size
ends the run with OSU's \(lqDATA VALIDATION ERROR\(rq line and exit status 1
"""


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def functions(root):
    """(name, prototype, doc comment, header) of every WEFT_EXPORT function."""
    out = []
    for h in HEADERS:
        text = read(os.path.join(root, "include", h))
        for m in re.finditer(r"(/\*\*(?:(?!\*/).)*\*/\s*)?^WEFT_EXPORT\s+([^;{]*?\(.*?\));",
                             text, re.S | re.M):
            doc, proto = m.group(1) or "", " ".join(m.group(2).split())
            name = re.search(r"(\w+)\s*\(", proto).group(1)
            doc = re.sub(r"^/\*\*|\*/\s*$", "", doc.strip())
            doc = " ".join(line.strip().lstrip("*").strip() for line in doc.splitlines()).strip()
            out.append((name, proto, doc, h))
    return out


CONFIG_BEGIN = "<!-- BEGIN generated by weft-info --config-markdown"
CONFIG_END = "<!-- END generated -->"


def config_vars(root):
    """(name, default, valid values, doc) of every WEFT_* variable: the reference
    doc/config.md holds between its marker lines, which is generated from the
    table of lib/config.c (`meson test tools-config-doc` checks that it is)."""
    text = read(os.path.join(root, "doc", "config.md"))
    start = text.index(CONFIG_BEGIN)
    body = text[text.index("\n", start) + 1:text.index(CONFIG_END, start)]
    out = []
    for line in body.splitlines():
        if not line.startswith("| `WEFT_"):
            continue
        cells = [c.strip().replace("\\|", "|")
                 for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        name, default, valid, doc = cells
        default = "" if default == "(empty)" else default.strip("`")
        out.append((name.strip("`"), default, valid, doc))
    if not out:
        raise SystemExit("gen_man.py: no variables between the markers of doc/config.md")
    return out


def esc(s):
    s = s.replace("\\", "\\e")
    return "\n".join(("\\&" + l if l.startswith((".", "'")) else l) for l in s.split("\n"))


def family_of(name):
    for fam in FAMILIES:
        if fam[2](name):
            return fam[0]
    return "weft_misc"


def pages(root, version):
    funcs = functions(root)
    by_family = {}
    for f in funcs:
        by_family.setdefault(family_of(f[0]), []).append(f)
    files = {}
    date = "2026"
    see = ", ".join("\\fB%s\\fR(3)" % fam[0] for fam in FAMILIES if fam[0] in by_family)
    for page, header, _, summary, desc in FAMILIES:
        fs = by_family.get(page)
        if not fs:
            continue
        headers = sorted({f[3] for f in fs} | {header}, key=HEADERS.index)
        names = [f[0] for f in fs]
        lines = ['.TH %s 3 "%s" "Weft %s" "Weft Programmer\'s Manual"' % (page.upper(), date,
                                                                           version),
                 ".SH NAME", esc(", ".join(names)) + " \\- " + esc(summary),
                 ".SH LIBRARY", "Weft (\\fIlibweft\\fR, \\fB\\-lweft\\fR; "
                 "\\fBpkg\\-config \\-\\-cflags \\-\\-libs weft\\fR, or CMake "
                 "\\fBfind_package(Weft)\\fR and \\fBWeft::weft\\fR)",
                 ".SH SYNOPSIS", ".nf"]
        lines += ["\\fB#include <%s>\\fR" % h for h in headers]
        lines.append("")
        for f in fs:
            lines.append("\\fB" + esc(f[1]) + ";\\fR")
        lines += [".fi", ".SH DESCRIPTION", esc(desc)]
        for f in fs:
            if f[2]:
                lines += [".TP", "\\fB%s\\fR()" % f[0], esc(f[2])]
        lines += [".SH RETURN VALUE",
                  "Functions returning \\fBweft_status_t\\fR return \\fBWEFT_SUCCESS\\fR (0), or a "
                  "negative error code that \\fBweft_strerror\\fR(3) describes; nothing aborts the "
                  "process on bad input.",
                  ".SH THREADS",
                  "Unless the description says otherwise: any thread, between \\fBweft_init\\fR "
                  "and \\fBweft_finalize\\fR; collectives on one communicator issued in the same "
                  "order on every rank (as MPI requires).",
                  ".SH SEE ALSO", see + ", \\fBweft\\fR(7), \\fBweft\\-info\\fR(1); "
                  "the documentation in \\fIshare/doc/weft\\fR (api.md)."]
        files["man3/%s.3" % page] = "\n".join(lines) + "\n"
        for n in names:
            if n != page:
                files["man3/%s.3" % n] = ".so man3/%s.3\n" % page
    # weft(7)
    lines = ['.TH WEFT 7 "%s" "Weft %s" "Weft Manual"' % (date, version), ".SH NAME",
             "weft \\- asynchronous, GPU\\-aware collective communication over MPI",
             ".SH DESCRIPTION",
             "Weft adds to MPI a progress engine (one thread per process that drives every "
             "operation in flight), stream\\-bound communicators, per\\-call algorithm selection "
             "and halo exchange. Build a program with \\fBpkg\\-config \\-\\-cflags \\-\\-libs "
             "weft\\fR or CMake's \\fBfind_package(Weft)\\fR, run it with \\fBmpiexec\\fR.",
             ".SH FUNCTION FAMILIES", see + ".",
             ".SH ENVIRONMENT",
             "Read once, at \\fBweft_init\\fR. A \\fBWEFT_\\fR variable not in this list is "
             "warned about with the closest known name; a malformed value fails "
             "\\fBweft_init\\fR."]
    for name, default, valid, doc in config_vars(root):
        lines += [".TP", "\\fB%s\\fR (default \\(lq%s\\(rq; valid: %s)" % (name, esc(default),
                                                                  esc(valid)), esc(doc)]
    lines += [".SH SEE ALSO", "\\fBweft\\-info\\fR(1), \\fBweft\\-tune\\fR(1), "
              "\\fBweft\\-trace\\fR(1), \\fBweft_osu_allreduce\\fR(1); share/doc/weft/config.md"]
    files["man7/weft.7"] = "\n".join(lines) + "\n"
    # section 1, by hand
    pdir = os.path.join(root, "doc", "man", "programs")
    for fn in sorted(os.listdir(pdir)):
        if fn.endswith(".1"):
            text = read(os.path.join(pdir, fn)).replace("@VERSION@", version)
            text = text.replace("@BENCH_OPTIONS@\n", BENCH_OPTIONS)
            files["man1/" + fn] = text.replace("@OSU_OPTIONS@\n", OSU_OPTIONS)
    return files


def main(argv):
    if len(argv) == 3 and argv[1] == "--list":
        for name in sorted(pages(argv[2], "0")):
            print(name)
        return 0
    if len(argv) == 6 and argv[1] == "--outdir" and argv[3] == "--version":
        outdir, version, root = argv[2], argv[4], argv[5]
        for name, text in pages(root, version).items():
            path = os.path.join(outdir, os.path.basename(name))
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(path + ".tmp", path)
        return 0
    print("usage: gen_man.py --list ROOT | --outdir DIR --version V ROOT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
