#!/bin/sh
# transports.sh - compare Weft's transports (doc/notes/ucx_measurements.md).
#
#   benchmarks/lab/transports.sh BUILD OUTDIR [-n NP] [-k REPEATS] [-r ROUNDS]
#                                [-l LAT_MAX] [-b BW_MAX] [-a AR_MAX] [-t "mpi ucx auto"]
#
# Runs, on NP ranks (default 2, bound to cores: BIND, default "-bind-to core",
# is passed to mpiexec; BIND= runs unbound), REPEATS times (default 1), each time for every
# transport in the list (default: WEFT_TRANSPORT=mpi, =ucx, and unset = auto):
#   weft_osu_p2p --mode lat -m 1:LAT_MAX  (default 64K) -> OUTDIR/p2p_lat_<tp>_<k>.csv
#   weft_osu_p2p --mode bw  -m 1:BW_MAX   (default 4M)  -> OUTDIR/p2p_bw_<tp>_<k>.csv
#   weft_osu_allreduce -m 4:AR_MAX        (default 16M) -> OUTDIR/allreduce_<tp>_<k>.csv
# and, once per repeat when UCX is built, both transports in the same processes
# (a communicator each, interleaved with plain MPI in one run):
#   weft_osu_transports (4 B - 64 KiB)    -> OUTDIR/same_process_<k>.csv
# keeping each program's text output next to its CSV (.txt). Each program times
# Weft and plain MPI in the same run, interleaved (median of ROUNDS rounds,
# default 7); the transports alternate from run to run, so that a slow phase of
# a shared machine hits both. At the end (python3) it prints, per program and
# size, the median over the REPEATS runs of every figure. A transport that is
# not built (ucx) is reported and the script exits 1.
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
    echo "usage: $prog BUILD OUTDIR [-n NP] [-k REPEATS] [-r ROUNDS] [-l LAT_MAX] [-b BW_MAX]" \
         "[-a AR_MAX] [-t TRANSPORTS]"
    echo "Weft's transports compared, REPEATS runs, medians (doc/notes/ucx_measurements.md)."
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
np=2 reps=1 rounds=7 lat_max=64K bw_max=4M ar_max=16M tps="mpi ucx auto"
while [ $# -gt 0 ]; do
    case $1 in
        -n|-k|-r|-l|-b|-a|-t) [ $# -ge 2 ] || usage_error "option '$1' needs a value" ;;
        *) usage_error "unknown option '$1'" ;;
    esac
    case $1 in
        -n) np=$2 ;;
        -k) reps=$2 ;;
        -r) rounds=$2 ;;
        -l) lat_max=$2 ;;
        -b) bw_max=$2 ;;
        -a) ar_max=$2 ;;
        -t) tps=$2 ;;
    esac
    shift 2
done

p2p=$build/benchmarks/weft_osu_p2p
ar=$build/benchmarks/weft_osu_allreduce
both=$build/benchmarks/weft_osu_transports
for exe in "$p2p" "$ar"; do
    [ -x "$exe" ] || { echo "$0: $exe not found (build first: ninja -C $build)" >&2; exit 1; }
done
mkdir -p "$out"
mpiexec=${MPIEXEC:-mpiexec}
# Ranks bound to cores (Weft's engine thread shares its rank's core); BIND= for none.
bind=${BIND--bind-to core}

run() { # run TRANSPORT NAME K EXE ARGS...
    tp=$1 name=$2 k=$3
    shift 3
    f=$out/${name}_${tp}_$k
    echo "== $name, WEFT_TRANSPORT=$tp, $np ranks, run $k" >&2
    if [ "$tp" = auto ]; then
        env -u WEFT_TRANSPORT "$mpiexec" $bind -n "$np" "$@" -r "$rounds" --quiet --csv "$f.csv" > "$f.txt"
    else
        env WEFT_TRANSPORT="$tp" "$mpiexec" $bind -n "$np" "$@" -r "$rounds" --quiet --csv "$f.csv" \
            > "$f.txt"
    fi
}

status=0
k=1
while [ "$k" -le "$reps" ]; do
    for tp in $tps; do
        if ! run "$tp" p2p_lat "$k" "$p2p" --mode lat -m "1:$lat_max" ||
           ! run "$tp" p2p_bw "$k" "$p2p" --mode bw -m "1:$bw_max" ||
           ! run "$tp" allreduce "$k" "$ar" -m "4:$ar_max"; then
            echo "$0: WEFT_TRANSPORT=$tp failed (see above; is UCX built?)" >&2
            status=1
        fi
    done
    if [ -x "$both" ]; then
        echo "== same_process (weft_osu_transports), $np ranks, run $k" >&2
        rc=0
        "$mpiexec" $bind -n "$np" "$both" -r "$rounds" --quiet \
            --csv "$out/same_process_$k.csv" > "$out/same_process_$k.txt" || rc=$?
        # 77: no UCX in this build, nothing to compare (no CSV is written)
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
            echo "$0: weft_osu_transports failed" >&2
            status=1
        fi
    fi
    k=$((k + 1))
done

if command -v python3 > /dev/null; then
    python3 - "$out" $tps << 'PYEOF'
import csv, glob, statistics, sys
out, tps = sys.argv[1], sys.argv[2:]
progs = [("p2p_lat", "weft", "mpi", "latency, us"), ("p2p_bw", "weft", "mpi", "bandwidth, MB/s"),
         ("allreduce", "weft_us", "mpi_us", "latency, us")]
for name, wcol, mcol, unit in progs:
    data = {}
    for tp in tps:
        for f in sorted(glob.glob(f"{out}/{name}_{tp}_*.csv")):
            for r in csv.DictReader(l for l in open(f) if not l.startswith("#")):
                s = int(r["size_bytes"])
                data.setdefault(s, {}).setdefault(tp, []).append(float(r[wcol]))
                data[s].setdefault("MPI", []).append(float(r[mcol]))
    if not data:
        continue
    cols = tps + ["MPI"]
    print(f"\n# {name} ({unit}): median over runs; Weft per transport, MPI baseline from all runs")
    print("%-10s" % "# size" + "".join("%14s" % ("weft-" + c if c != "MPI" else c) for c in cols))
    for s in sorted(data):
        row = "%-10d" % s
        for c in cols:
            v = data[s].get(c, [])
            row += "%14.2f" % statistics.median(v) if v else "%14s" % "-"
        print(row)
same = {}
for f in sorted(glob.glob(f"{out}/same_process_*.csv")):
    for r in csv.DictReader(l for l in open(f) if not l.startswith("#")):
        key = (r["test"], int(r["size_bytes"]))
        for c in ("weft_mpi_us", "weft_ucx_us", "mpi_us", "ucx_over_mpi_transport"):
            same.setdefault(key, {}).setdefault(c, []).append(float(r[c]))
if same:
    print("\n# same processes (weft_osu_transports, us): median over runs; ucx/mpi-tp = Weft over "
          "UCX / Weft over the MPI transport, per run, then the median; lower = how many runs had "
          "UCX lower")
    print("%-10s%-10s%12s%12s%12s%12s%8s" % ("# test", "size", "weft-mpi", "weft-ucx", "MPI",
                                               "ucx/mpi-tp", "lower"))
    for (test, s) in sorted(same):
        d = same[(test, s)]
        m = lambda c: statistics.median(d[c])
        low = sum(1 for x in d["ucx_over_mpi_transport"] if x < 1.0)
        print("%-10s%-10d%12.3f%12.3f%12.3f%12.3f%5d/%-2d" % (test, s, m("weft_mpi_us"),
              m("weft_ucx_us"), m("mpi_us"), m("ucx_over_mpi_transport"), low,
              len(d["ucx_over_mpi_transport"])))
PYEOF
fi
exit $status
