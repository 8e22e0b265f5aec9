#!/bin/sh
# transports.sh - compare Weft's transports (doc/benchmarks_ucx.md).
#
#   benchmarks/transports.sh BUILD OUTDIR [-n NP] [-l LAT_MAX] [-b BW_MAX] [-a AR_MAX]
#
# Runs, on NP ranks (default 2), for WEFT_TRANSPORT=mpi, =ucx and unset (auto):
#   weft_osu_p2p --mode lat -m 1:LAT_MAX   (default 64K)  -> OUTDIR/p2p_lat_<tp>.csv
#   weft_osu_p2p --mode bw  -m 1:BW_MAX    (default 4M)   -> OUTDIR/p2p_bw_<tp>.csv
#   weft_osu_allreduce -m 4:AR_MAX         (default 16M)  -> OUTDIR/allreduce_<tp>.csv
# and keeps each program's text output in OUTDIR/<name>_<tp>.txt. Each program
# times Weft and plain MPI in the same run, interleaved (median of rounds).
# A transport that is not built (ucx) is reported and skipped.
set -eu

usage() {
    echo "usage: $0 BUILD OUTDIR [-n NP] [-l LAT_MAX] [-b BW_MAX] [-a AR_MAX]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
build=$1
out=$2
shift 2
np=2 lat_max=64K bw_max=4M ar_max=16M
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
        -n) np=$2 ;;
        -l) lat_max=$2 ;;
        -b) bw_max=$2 ;;
        -a) ar_max=$2 ;;
        *) usage ;;
    esac
    shift 2
done

p2p=$build/benchmarks/weft_osu_p2p
ar=$build/benchmarks/weft_osu_allreduce
for exe in "$p2p" "$ar"; do
    [ -x "$exe" ] || { echo "$0: $exe not found (build first: ninja -C $build)" >&2; exit 1; }
done
mkdir -p "$out"
mpiexec=${MPIEXEC:-mpiexec}

run() { # run TRANSPORT NAME EXE ARGS...
    tp=$1 name=$2
    shift 2
    echo "== $name, WEFT_TRANSPORT=$tp, $np ranks" >&2
    if [ "$tp" = auto ]; then
        env -u WEFT_TRANSPORT "$mpiexec" -n "$np" "$@" --quiet --csv "$out/${name}_$tp.csv" \
            > "$out/${name}_$tp.txt"
    else
        env WEFT_TRANSPORT="$tp" "$mpiexec" -n "$np" "$@" --quiet --csv "$out/${name}_$tp.csv" \
            > "$out/${name}_$tp.txt"
    fi
    cat "$out/${name}_$tp.txt"
}

status=0
for tp in mpi ucx auto; do
    if ! run "$tp" p2p_lat "$p2p" --mode lat -m "1:$lat_max" ||
       ! run "$tp" p2p_bw "$p2p" --mode bw -m "1:$bw_max" ||
       ! run "$tp" allreduce "$ar" -m "4:$ar_max"; then
        echo "$0: WEFT_TRANSPORT=$tp failed (see above; ucx may not be built)" >&2
        status=1
    fi
done
exit $status
