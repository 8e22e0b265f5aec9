#!/bin/sh
# ucx_profile.sh - where the point-to-point latency of Weft over UCX and of
# Weft over MPI goes, per message size (doc/notes/ucx_measurements.md, "The profile").
#
#   benchmarks/lab/ucx_profile.sh BUILD OUTDIR [-s "8 1024 4096 8192"] [-k REPEATS] [-r ROUNDS]
#
# Per size and repeat (default 3), on 2 ranks (BIND, default "-bind-to core",
# is passed to mpiexec; BIND= runs unbound):
#   weft_osu_transports --test lat  Weft over MPI, Weft over UCX, plain MPI
#   ucx_raw_lat                     UCX on a worker of its own (no Weft), plain MPI
#   weft_lat_split                  one message split into five intervals, per transport
# the first two each once as is (the latencies) and once under the LD_PRELOAD probe
# libucx_progress_probe.so (rank 0: the median duration of the
# ucp_worker_progress calls that delivered a message, per worker; the probe
# adds about 40 ns per call, so the latencies come from the runs without it).
# weft_lat_split runs under the probe only. Outputs
# OUTDIR/<program>_<size>_<k>[_probe].txt, then a summary (python3): per size
# the median over repeats of every latency, of every worker's delivering-call
# duration, and of every interval of the split.
set -eu

# The Weft version: written in by the build's copy (BUILD/benchmarks/lab/), else
# read from the source tree's meson.build.
version=@WEFT_VERSION@
case $version in
    @*) version=$(sed -n "s/^ *version : '\\([^']*\\)',\$/\\1/p" \
                      "$(dirname "$0")/../../meson.build" 2>/dev/null || true) ;;
esac
prog=$(basename "$0")
usage() {
    echo "usage: $prog BUILD OUTDIR [-s SIZES] [-k REPEATS] [-r ROUNDS]"
    echo "Where Weft's point-to-point latency goes, per transport (doc/notes/ucx_measurements.md)."
}
usage_error() { # MESSAGE: exit 2, as every Weft program
    echo "$prog: error: $1" >&2
    echo "Try '$prog --help'." >&2
    exit 2
}
case ${1-} in
    -h|--help) usage; exit 0 ;;
    -V|--version) echo "$prog (Weft) $version"; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
esac
[ $# -ge 2 ] || usage_error "BUILD and OUTDIR are needed"
build=$1
out=$2
shift 2
sizes="8 1024 4096 8192" reps=3 rounds=7
while [ $# -gt 0 ]; do
    case $1 in
        -s|-k|-r) [ $# -ge 2 ] || usage_error "option '$1' needs a value" ;;
        *) usage_error "unknown option '$1'" ;;
    esac
    case $1 in
        -s) sizes=$2 ;;
        -k) reps=$2 ;;
        -r) rounds=$2 ;;
    esac
    shift 2
done

both=$build/benchmarks/weft_osu_transports
raw=$build/benchmarks/lab/ucx_raw_lat
probe=$build/benchmarks/lab/libucx_progress_probe.so
split=$build/benchmarks/lab/weft_lat_split
for f in "$both" "$raw" "$split" "$probe"; do
    [ -e "$f" ] || { echo "$0: $f not found (a build with UCX: ninja -C $build)" >&2; exit 1; }
done
case $probe in /*) ;; *) probe=$(pwd)/$probe ;; esac
mkdir -p "$out"
mpiexec=${MPIEXEC:-mpiexec}
bind=${BIND--bind-to core}

# SUMMARY_ONLY=1: only summarise the files already in OUTDIR.
[ "${SUMMARY_ONLY:-0}" = 1 ] || for k in $(seq 1 "$reps"); do
    for s in $sizes; do
        for prog in weft_osu_transports ucx_raw_lat; do
            exe=$both
            extra="--test lat"
            [ "$prog" = ucx_raw_lat ] && exe=$raw extra=
            # shellcheck disable=SC2086 # $bind and $extra are word lists
            $mpiexec $bind -n 2 "$exe" $extra -m "$s:$s" -r "$rounds" --quiet \
                >"$out/${prog}_${s}_$k.txt"
            # shellcheck disable=SC2086
            $mpiexec $bind -n 2 -env LD_PRELOAD "$probe" -env PROBE_RANK 0 \
                "$exe" $extra -m "$s:$s" -r "$rounds" --quiet >"$out/${prog}_${s}_${k}_probe.txt" 2>&1
        done
        $mpiexec $bind -n 2 -env LD_PRELOAD "$probe" -env PROBE_RANK none "$split" -m "$s" \
            >"$out/weft_lat_split_${s}_$k.txt"
        echo "# $0: repeat $k, $s bytes done" >&2
    done
done

python3 - "$out" "$reps" $sizes <<'EOF'
import re, statistics, sys
out, reps, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def table_row(path, size):
    for line in open(path):
        f = line.split()
        if f and f[0] == size:
            return [float(x) for x in f[1:4]]  # float() reads "nan" too: columns stay put
    raise SystemExit(f"{path}: no row for {size}")

def probe(path):
    w = {}
    for line in open(path):
        m = re.search(r"worker (\d+): \d+ delivering calls, median (\d+) ns", line)
        if m:
            w[int(m.group(1))] = float(m.group(2))
    return w

med = statistics.median
print("# latency, us (median over %d runs); delivering ucp_worker_progress call, ns (rank 0)" % reps)
print("# weft_osu_transports: weft-mpi, weft-ucx, mpi, ucx/mpi-tp (per run, then the median); "
      "ucx_raw_lat: ucx-raw, mpi, raw/mpi (the same)")
print("# %-7s %9s %9s %9s %9s | %9s %9s %9s | %10s %10s %10s" % ("size", "weft-mpi", "weft-ucx",
      "mpi", "ucx/mpi", "ucx-raw", "mpi", "raw/mpi", "MPICH's wk", "Weft's wk", "raw wk"))
for s in sizes:
    t = [table_row(f"{out}/weft_osu_transports_{s}_{k}.txt", s) for k in range(1, reps + 1)]
    r = [table_row(f"{out}/ucx_raw_lat_{s}_{k}.txt", s) for k in range(1, reps + 1)]
    pt = [probe(f"{out}/weft_osu_transports_{s}_{k}_probe.txt") for k in range(1, reps + 1)]
    pr = [probe(f"{out}/ucx_raw_lat_{s}_{k}_probe.txt") for k in range(1, reps + 1)]
    def pm(ps, w):
        v = [p[w] for p in ps if w in p]
        return med(v) if v else float("nan")
    # weft_osu_transports: worker 1 MPICH's, 2 Weft's; ucx_raw_lat: 1 MPICH's,
    # 2 Weft's (idle), 3 its own.
    raw_w = 3 if any(3 in p for p in pr) else 2
    print("%-9s %9.3f %9.3f %9.3f %9.3f | %9.3f %9.3f %9.3f | %10.0f %10.0f %10.0f" % (
        s, med(x[0] for x in t), med(x[1] for x in t), med(x[2] for x in t),
        med(x[1] / x[0] for x in t), med(x[0] for x in r), med(x[1] for x in r),
        med(x[0] / x[1] for x in r), pm(pt, 1), pm(pt, 2), pm(pr, raw_w)))
print()
print("# weft_lat_split (under the probe, which adds 0.1 - 0.2 us per message): one message, ns, "
      "median over runs of the per-run medians")
print("# %-7s %-4s %-5s %11s %11s %11s %11s %11s %11s %11s" % ("size", "tp", "dir", "send->post",
      "post call", "in flight", "delivery", "->return", "sum", "sum mean"))
for s in sizes:
    rows = {}
    for k in range(1, reps + 1):
        for line in open(f"{out}/weft_lat_split_{s}_{k}.txt"):
            f = line.split()
            if len(f) >= 9 and f[0] in ("mpi", "ucx"):
                rows.setdefault((f[0], f[1]), []).append([float(x) for x in f[2:9]])
    for key in sorted(rows):
        v = rows[key]
        print("%-9s %-4s %-5s" % (s, key[0], key[1]) +
              "".join(" %11.1f" % med(x[j] for x in v) for j in range(7)))
EOF
