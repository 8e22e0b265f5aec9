#!/bin/bash
# gpu_run.sh - the GPU run of doc/gpu.md in one command: the CUDA tests (1 and
# 2 ranks; stream memops, the event fallback, host transfer only), the stream
# suite on the GPU build, the Python layer's torch tests with CUDA tensors and
# DDP on CUDA, and the allreduce benchmark with device buffers. Every step has
# a time limit; a summary table (step, exit status, seconds) is printed last.
#
# Usage: bash scripts/gpu_run.sh [BUILD [MPIROOT [OUTDIR]]]
#   BUILD    a build with -Dcuda=enabled -Dnccl=enabled (default build-gpu),
#            or the folder scripts/gpu_pack.sh makes (.gpu/b)
#   MPIROOT  a folder with MPICH unpacked by dpkg -x (usr/bin/mpiexec.hydra);
#            empty: mpiexec from PATH
#   OUTDIR   where the log, the benchmark CSVs and summary.txt go
#            (default gpu-out)
# Exit status: 0 when every test step passed (exit 0), 1 otherwise.
set -u
B=$(cd "${1:-build-gpu}" && pwd)
R=${2:-}
O=${3:-gpu-out}
mkdir -p "$O"
O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."

if [ -n "$R" ]; then
    R=$(cd "$R" && pwd)
    export PATH=$R/usr/bin:$PATH
    export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -n "$R" ]; then MPIEXEC=$R/usr/bin/mpiexec.hydra; else MPIEXEC=$(command -v mpiexec); fi
[ -x "$MPIEXEC" ] || { echo "gpu_run.sh: no mpiexec (MPIROOT: ${R:-none})" >&2; exit 1; }
# a machine whose host name does not resolve: launch on localhost by fork
MPIEXEC=("$MPIEXEC")
if ! timeout 30 "${MPIEXEC[@]}" -n 1 true >/dev/null 2>&1; then
    MPIEXEC+=(-launcher fork -hosts localhost)
fi
# NCCL: the system's if the loader finds it, else the Python environment's
if ! ldconfig -p | grep -q 'libnccl.so.2 '; then
    nd=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
    [ -n "$nd" ] && [ -e "$nd/libnccl.so.2" ] &&
        export LD_LIBRARY_PATH=$nd${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done
export WEFT_TIMEOUT=60
# the whole run's budget: a step that would start after it is reported, not run
TOTAL_S=${GPU_RUN_TOTAL_S:-480}
START=$(date +%s)

LOG=$O/log.txt
SUM=$O/summary.txt
: >"$LOG"
: >"$SUM"
fail=0
# step NAME LIMIT_S [ENV=V ...] -- COMMAND...: runs it, logs its output, adds a row
step() {
    local name=$1 limit=$2 envs=() t0 rc
    shift 2
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    if [ $(( $(date +%s) - START )) -gt "$TOTAL_S" ]; then
        printf '%-34s not run: past the run budget (%ss)\n' "$name" "$TOTAL_S" | tee -a "$SUM"
        case $name in bench-*) ;; *) fail=1 ;; esac
        return
    fi
    echo "=== $name: ${envs[*]} $*" >>"$LOG"
    t0=$(date +%s)
    env "${envs[@]}" timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
    rc=$?
    printf '%-34s rc=%-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" | tee -a "$SUM"
    case $name in bench-*) ;; *) [ "$rc" -eq 0 ] || fail=1 ;; esac
}

{
    date -u
    nvidia-smi -L 2>&1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    "${MPIEXEC[@]}" --version 2>&1 | head -3
    ldd "$B/libweft.so.0" | grep -E 'nccl|cudart|mpich|ucp'
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1
} >>"$LOG" 2>&1
grep -E 'GPU 0|nccl|torch' "$LOG" | tee -a "$SUM"

for n in 1 2; do
    step "cuda-n$n-default" 90 WEFT_LOG_LEVEL=3 NCCL_DEBUG=VERSION -- \
        "${MPIEXEC[@]}" -n $n "$B/tests/mpi/mpi_cuda"
    step "cuda-n$n-events" 90 WEFT_LOG_LEVEL=3 WEFT_CUDA_MEMOPS=0 -- \
        "${MPIEXEC[@]}" -n $n "$B/tests/mpi/mpi_cuda"
    step "cuda-n$n-nonccl" 90 WEFT_NCCL_MIN_BYTES=9223372036854775807 -- \
        "${MPIEXEC[@]}" -n $n "$B/tests/mpi/mpi_cuda"
done
grep -m1 -o 'NCCL version [^ ]*' "$LOG" | tee -a "$SUM"
grep -E '^\[weft .*(CUDA|NCCL)' "$LOG" | sed 's/rank [0-9]*/rank R/' | sort | uniq -c | head -20 |
    tee -a "$SUM"
for n in 1 2 3 4; do
    step "stream-n$n-default" 60 -- "${MPIEXEC[@]}" -n $n "$B/tests/mpi/mpi_stream"
    step "stream-n$n-rd" 60 WEFT_ALLREDUCE_ALGO=recursive_doubling -- \
        "${MPIEXEC[@]}" -n $n "$B/tests/mpi/mpi_stream"
done
for n in 1 2; do
    step "py-torch-n$n" 150 PYTHONPATH="$B/python" WEFT_LIBRARY="$B/libweft.so.0" \
        PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 -- \
        "${MPIEXEC[@]}" -n $n python3 -m pytest -q -p no:cacheprovider -rs \
        python/tests/test_torch_backend.py
done
step "py-ddp-n2" 150 PYTHONPATH="$B/python" WEFT_LIBRARY="$B/libweft.so.0" \
    PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 -- \
    "${MPIEXEC[@]}" -n 2 python3 -m pytest -q -p no:cacheprovider -rs python/tests/test_ddp.py
A=$B/benchmarks/weft_osu_allreduce
step bench-n2-auto 90 -- "${MPIEXEC[@]}" -n 2 "$A" -d cuda -m 4:64M -r 3 --budget 0.2 --quiet \
    --csv "$O/bench-n2-auto.csv"
step bench-n2-nccl 90 -- "${MPIEXEC[@]}" -n 2 "$A" -d cuda -a nccl -m 4:64M -r 3 --budget 0.2 \
    --quiet --csv "$O/bench-n2-nccl.csv"
step bench-n2-rd 90 -- "${MPIEXEC[@]}" -n 2 "$A" -d cuda -a recursive_doubling -m 4:1M -r 3 \
    --budget 0.2 --quiet --csv "$O/bench-n2-rd.csv"
step bench-n1-auto 90 -- "${MPIEXEC[@]}" -n 1 "$A" -d cuda -m 4:64M -r 3 --budget 0.2 --quiet \
    --csv "$O/bench-n1-auto.csv"
# the NCCL threshold's data: each path forced over the same sizes, one rank
step bench-n1-nccl 90 -- "${MPIEXEC[@]}" -n 1 "$A" -d cuda -a nccl -m 4:1M -r 3 --budget 0.2 \
    --quiet --csv "$O/bench-n1-nccl.csv"
step bench-n1-hostxfer 90 WEFT_NCCL_MIN_BYTES=9223372036854775807 -- "${MPIEXEC[@]}" -n 1 "$A" \
    -d cuda -m 4:1M -r 3 --budget 0.2 --quiet --csv "$O/bench-n1-hostxfer.csv"
step bench-n2-host 90 -- "${MPIEXEC[@]}" -n 2 "$A" -m 4:64M -r 3 --budget 0.2 --quiet \
    --csv "$O/bench-n2-host.csv"
echo "failed test steps: $fail (1 = some)" | tee -a "$SUM"
exit $fail
