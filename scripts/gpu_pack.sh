#!/bin/bash
# gpu_pack.sh - prepare the GPU run of doc/gpu.md for a GPU machine that has
# the CUDA driver, the toolkit's runtime and NCCL but no MPI: builds Weft with
# CUDA and NCCL required (build-gpu), unpacks Debian's MPICH and UCX with
# dpkg -x, and copies what scripts/gpu_run.sh needs into one folder:
#
#   .gpu/root/   MPICH (mpiexec.hydra, libmpich), UCX, hwloc, numa: dpkg -x
#   .gpu/b/      libweft, the GPU and stream test programs, the allreduce
#                benchmark and the Python package, in the build tree's layout
#                (the programs find libweft through their $ORIGIN rpath)
#
# Usage: bash scripts/gpu_pack.sh        (from the repository root, as root for
#                                         apt-get download; about a minute)
# Then, on the GPU machine, from a copy of the repository with .gpu beside it:
#   bash scripts/gpu_run.sh .gpu/b .gpu/root OUTDIR
# .gpu/ is not tracked (add '/.gpu/' to .git/info/exclude).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f build-gpu/build.ninja ]; then
    meson setup build-gpu --buildtype=release -Dcuda=enabled -Dnccl=enabled
fi
ninja -C build-gpu

rm -rf .gpu/root .gpu/b .gpu/debs
mkdir -p .gpu/debs .gpu/b/tests/mpi .gpu/b/benchmarks
(cd .gpu/debs && apt-get download mpich libmpich12 libhwloc15 libslurm38 libnuma1 libucx0 libudev1)
for f in .gpu/debs/*.deb; do dpkg -x "$f" .gpu/root; done
# what the run does not use (keeps the carried tree small)
rm -rf .gpu/debs .gpu/root/usr/share .gpu/root/usr/lib/x86_64-linux-gnu/libmpichfort.so* \
       .gpu/root/usr/lib/x86_64-linux-gnu/libmpichcxx.so*

cp -a build-gpu/libweft.so build-gpu/libweft.so.0 build-gpu/libweft.so.0.1.0 .gpu/b/
cp -a build-gpu/tests/mpi/mpi_cuda build-gpu/tests/mpi/mpi_stream .gpu/b/tests/mpi/
cp -a build-gpu/benchmarks/weft_osu_allreduce build-gpu/benchmarks/weft_osu_coll .gpu/b/benchmarks/
cp -a build-gpu/python .gpu/b/python
du -sh .gpu
