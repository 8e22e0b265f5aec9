#!/bin/bash
# check_verbose.sh MPIEXEC PRELOAD PROGRAM: runs PROGRAM --quick on 2 ranks
# under the preload with WEFT_MPI_VERBOSE=1 and checks the per-call-site
# report: every intercepted call reached Weft somewhere, and the fall-through
# cases the program makes are reported with their reasons. Weft's profiler
# (WEFT_PROFILE) must count the served calls too. Then
# WEFT_MPI_CALLS=allgatherv,gatherv,scatter,reduce_scatter on the vector
# forms alone (--vector): allgatherv, gatherv and reduce_scatter served,
# alltoallv, scatterv and reduce_scatter_block not (the keys name the vector
# forms apart from gather, scatter and reduce_scatter_block).
set -u
mpiexec=$1 preload=$2 prog=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$mpiexec" -n 2 -genv LD_PRELOAD "$preload" -genv WEFT_MPI_VERBOSE 1 \
      -genv WEFT_PROFILE "$tmp/profile.json" "$prog" --quick 2>&1)
rc=$?
fail=0
if [ $rc -ne 0 ]; then echo "program failed ($rc):"; echo "$out" | tail -20; exit 1; fi
for call in Allreduce Iallreduce Reduce_scatter_block Ireduce_scatter_block Allgather Iallgather \
            Bcast Ibcast Reduce Ireduce Alltoall Ialltoall Gather Igather Scatter Iscatter \
            Allgatherv Iallgatherv Alltoallv Ialltoallv Gatherv Igatherv Scatterv Iscatterv \
            Reduce_scatter Ireduce_scatter Barrier Ibarrier; do
    if ! grep -Eq "^\[weft-mpi 0\] MPI_$call at .*: [0-9]+ to Weft$" <<<"$out"; then
        echo "MPI_$call: no call site served by Weft"; fail=1
    fi
done
for why in "datatype not reduced by Weft" "operation not served by Weft" "non-contiguous datatype"; do
    if ! grep -q "to MPI ($why" <<<"$out"; then echo "no fall-through reported as '$why'"; fail=1; fi
done
# the vector forms' non-contiguous and resized types fall through, with their reason
for call in Allgatherv Iallgatherv Alltoallv Ialltoallv Gatherv Igatherv Scatterv Iscatterv; do
    if ! grep -Eq "^\[weft-mpi 0\] MPI_$call at .*: [0-9]+ to MPI \(non-contiguous datatype\)$" <<<"$out"; then
        echo "MPI_$call: no fall-through reported as 'non-contiguous datatype'"; fail=1
    fi
done
# reduce_scatter's user-defined operation falls through, with its reason
for call in Reduce_scatter Ireduce_scatter; do
    if ! grep -Eq "^\[weft-mpi 0\] MPI_$call at .*: [0-9]+ to MPI \(operation not served by Weft" <<<"$out"; then
        echo "MPI_$call: no fall-through reported as 'operation not served by Weft'"; fail=1
    fi
done
# the verbose report names the program's own call sites
if ! grep -Eq "^\[weft-mpi 1\] MPI_Allreduce at $(basename "$prog")\(" <<<"$out"; then
    echo "rank 1's report does not name the program's call sites"; fail=1
fi
for op in allreduce reduce_scatter allgather bcast reduce alltoall gather scatter barrier \
          allgatherv alltoallv gatherv scatterv reduce_scatterv; do
    grep -q "\"op\": \"$op\"" "$tmp/profile.json" 2>/dev/null ||
        { echo "WEFT_PROFILE has no $op entry"; fail=1; }
done
[ $fail -eq 0 ] || { echo "$out" | grep weft-mpi | head -40; exit 1; }
# WEFT_MPI_CALLS names the vector forms on their own: allgatherv, gatherv and
# reduce_scatter; scatter does not take scatterv along, nor reduce_scatter
# reduce_scatter_block (case-blind below: MPI_Allgatherv and MPI_Iallgatherv)
calls=allgatherv,gatherv,scatter,reduce_scatter
out=$("$mpiexec" -n 2 -genv LD_PRELOAD "$preload" -genv WEFT_MPI_VERBOSE 1 \
      -genv WEFT_MPI_CALLS $calls "$prog" --vector 2>&1)
rc=$?
if [ $rc -ne 0 ]; then echo "WEFT_MPI_CALLS=$calls: program failed ($rc):"; echo "$out" | tail -20; exit 1; fi
grep -Eq "^\[weft-mpi 0\] MPI_Iallgatherv at .*: [0-9]+ to Weft$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Iallgatherv not served"; fail=1; }
grep -Eq "^\[weft-mpi 0\] MPI_Alltoallv at .*: [0-9]+ to MPI \(not in WEFT_MPI_CALLS\)$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Alltoallv not left to MPI"; fail=1; }
grep -Eq "^\[weft-mpi 1\] MPI_Igatherv at .*: [0-9]+ to Weft$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Igatherv not served"; fail=1; }
grep -Eq "^\[weft-mpi 1\] MPI_Scatterv at .*: [0-9]+ to MPI \(not in WEFT_MPI_CALLS\)$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Scatterv not left to MPI"; fail=1; }
grep -Eq "^\[weft-mpi 0\] MPI_Ireduce_scatter at .*: [0-9]+ to Weft$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Ireduce_scatter not served"; fail=1; }
grep -Eq "^\[weft-mpi 1\] MPI_Reduce_scatter_block at .*: [0-9]+ to MPI \(not in WEFT_MPI_CALLS\)$" <<<"$out" ||
    { echo "WEFT_MPI_CALLS=$calls: MPI_Reduce_scatter_block not left to MPI"; fail=1; }
if grep -Eiq "MPI_I?(all)?gatherv at .*not in WEFT_MPI_CALLS|MPI_I?(alltoallv|scatterv) at .*to Weft" <<<"$out" ||
   grep -Eiq "MPI_I?reduce_scatter at .*not in WEFT_MPI_CALLS|MPI_I?reduce_scatter_block at .*to Weft" <<<"$out"; then
    echo "WEFT_MPI_CALLS=$calls: a vector call took the wrong way"; fail=1
fi
[ $fail -eq 0 ] || { echo "$out" | grep weft-mpi | head -40; exit 1; }
echo "verbose report: every intercepted call served, fall-throughs named; profiled by Weft"
