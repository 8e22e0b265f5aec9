#!/bin/bash
# run_mpi4py.sh MPIEXEC PRELOAD SCRIPT: runs an mpi4py script on 2 ranks
# under the interposer (the venv scripts/deps.sh makes; exit 77, skipped,
# without it) and checks that Weft served its collectives.
set -u
mpiexec=$1 preload=$2 script=$3
venv="$HOME/.cache/weft-mpi4py-venv"
if ! "$venv/bin/python" -c "import mpi4py" 2>/dev/null; then
    echo "no mpi4py venv at $venv (scripts/deps.sh makes it): skipped"; exit 77
fi
out=$("$mpiexec" -n 2 -genv LD_LIBRARY_PATH "$venv/mpich-abi" -genv LD_PRELOAD "$preload" \
      -genv WEFT_MPI_VERBOSE 1 "$venv/bin/python" "$script" 2>&1)
rc=$?
echo "$out" | grep -v '^\[weft-mpi 1\]'
[ $rc -eq 0 ] || { echo "the script failed ($rc)"; exit 1; }
for call in Allreduce Iallreduce Bcast Iallgather Alltoall Barrier; do
    grep -Eq "^\[weft-mpi 0\] MPI_$call at .*: [0-9]+ to Weft$" <<<"$out" ||
        { echo "MPI_$call from mpi4py did not reach Weft"; exit 1; }
done
echo "mpi4py under the preload: results right, collectives served by Weft"
