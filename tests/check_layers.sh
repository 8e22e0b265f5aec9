#!/bin/bash
# check_layers.sh SRCDIR - the include rules of Weft's layers (doc/design.md,
# "Layers"), read from the sources' #include lines:
#
#   mpi        under lib/, progress/ and base/ only the MPI interop includes
#              <mpi.h>, "mpi_interop.h" or "weft_mpi.h" (the core reaches MPI
#              through lib/ctl.h);
#   base       base/ includes nothing of Weft but base/ and weft.h;
#   progress   progress/ includes base/, progress/ and weft.h only;
#   coll       the algorithms (lib/coll/*.c) include the algorithm interface
#              algo.h (and coll_util.h, config.h, the table algos.def) only;
#   transports backends/ (the table, backends/mpi, backends/ucx, backends/shm) include the
#              interfaces only: transport.h, ctl.h, progress.h, base/, the
#              public headers; backends/mpi also mpi_interop.h and the
#              algorithm interface algo.h (it provides the mpi allreduce);
#   devices    backends/cuda, backends/nccl: device.h, base/, public headers,
#              their own headers, and transport.h's communicator view, ctl.h,
#              config.h, reduce.h.
set -u
src=${1:?usage: check_layers.sh SRCDIR}
cd "$src" || exit 2

RULES="mpi base progress coll transports devices"

MPI_INTEROP="lib/mpi_interop.h lib/mpi_interop.c lib/mpi_ctl.c"
PUBLIC="weft.h weft_cuda.h weft_halo.h weft_stream.h"
BASE="sys.h log.h handle.h"

# quoted includes of a file, one per line
includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }
# files of a folder (not below it unless asked)
sources() { find "$@" -maxdepth 1 \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort; }

# violations of one rule, one line each ("file: what")
check_mpi() {
    local f
    for f in $(find lib progress base \( -name '*.c' -o -name '*.h' \) | sort); do
        case " $MPI_INTEROP " in *" $f "*) continue ;; esac
        grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*\(<mpi\.h>\|"mpi_interop\.h"\|"weft_mpi\.h"\)' "$f"
    done
}
check_allowed() { # FILES... -- ALLOWED...
    local files=() allowed f h
    while [ "$1" != "--" ]; do files+=("$1"); shift; done
    shift
    allowed=" $* "
    for f in "${files[@]}"; do
        for h in $(includes "$f"); do
            case "$allowed" in *" $h "*) ;; *) echo "$f: includes \"$h\"" ;; esac
        done
        grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*<mpi\.h>' "$f"
    done
}
check_base() { check_allowed $(sources base) -- $BASE weft.h; }
check_progress() { check_allowed $(sources progress) -- $BASE progress.h progress_private.h weft.h; }
check_coll() {
    # algorithms see the algorithm interface (and the configuration where
    # they read a variable); algos.c includes the table of rows too
    check_allowed $(find lib/coll -maxdepth 1 -name '*.c' | sort) lib/coll/coll_util.h \
        lib/coll/coll_shm.h -- \
        algo.h coll_util.h coll_shm.h config.h algos.def $BASE $PUBLIC
}
check_transports() {
    local common="transport.h ctl.h progress.h $BASE $PUBLIC"
    check_allowed backends/transport.h backends/transport.c $(sources backends/ucx) -- $common
    # the node's shared-memory path: its interface and what a transport sees
    check_allowed backends/node.h $(sources backends/shm) -- node.h $common
    check_allowed $(sources backends/mpi) -- $common mpi_interop.h algo.h
}
check_devices() {
    # the device interface, and what the transports see of a communicator
    # (transport.h's view, ctl.h: NCCL's id broadcast), the configuration and
    # the datatype rules (reduce.h)
    check_allowed backends/device.h $(sources backends/cuda backends/nccl) -- \
        device.h cuda_kernels.h transport.h ctl.h config.h reduce.h $BASE $PUBLIC
}

fail=0
for rule in $RULES; do
    out=$(check_$rule)
    if [ -z "$out" ]; then
        echo "ok      $rule"
    else
        echo "FAIL    $rule:"
        sed 's/^/          /' <<<"$out"
        fail=1
    fi
done
exit $fail
