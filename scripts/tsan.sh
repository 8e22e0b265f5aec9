#!/usr/bin/env bash
# The engine's multi-rank tests under ThreadSanitizer (data races are bugs).
# UCX's memory hooks fight TSan's interceptors, so they are switched off here.
# 4 ranks on the 2 cores run the oversubscribed waits (a caller and the engine
# sleeping on the node's shared-memory doorbells); the hierarchical allreduce
# on 2 test nodes runs the path's jobs inside another op (a third field may
# list several variables, comma-separated). The stream tests run the stream
# ops' ownership hand-over and the retire list (lib/stream.c), and with
# WEFT_STREAM_STAGE=1 the staging copies device buffers take.
# Usage: bash scripts/tsan.sh [BUILD_DIR]   (default: build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
rm -rf "$dir"
meson setup "$dir" -Db_sanitize=thread -Dbuildtype=debugoptimized -Dloom=false >/dev/null
ninja -C "$dir" -j"$(nproc)" tests/mpi/mpi_inflight tests/mpi/mpi_allreduce tests/mpi/mpi_errors \
  tests/mpi/mpi_embed tests/mpi/mpi_handles tests/mpi/mpi_stream \
  interpose/libweft-mpi.so tests/interpose/interpose_test_mpi_calls \
  tests/interpose/interpose_test_mpi_threads benchmarks/mpi_overlap
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 report_signal_unsafe=0"
fail=0
for t in "inflight 2 WEFT_TRANSPORT=mpi" "inflight 2 WEFT_TRANSPORT=ucx" "allreduce 3 WEFT_TRANSPORT=mpi" "errors 2 WEFT_TRANSPORT=mpi" "embed 2 WEFT_TRANSPORT=mpi" "embed 3 WEFT_TRANSPORT=ucx" "handles 2 WEFT_TRANSPORT=mpi" "inflight 4 WEFT_TRANSPORT=mpi" "allreduce 4 WEFT_ALLREDUCE_ALGO=shm" \
         "allreduce 4 WEFT_NODE_RANKS=2,WEFT_ALLREDUCE_ALGO=hierarchical,WEFT_HIER_SEGMENT=4096" \
         "stream 2 WEFT_TRANSPORT=mpi" "stream 3 WEFT_STREAM_STAGE=1"; do
  set -- $t
  log="$dir/tsan-$1-$2-${3#*=}.log"
  if env ${3//,/ } WEFT_TIMEOUT=120 timeout 300 mpiexec -n "$2" "$dir/tests/mpi/mpi_$1" >"$log" 2>&1 &&
     ! grep -q "WARNING: ThreadSanitizer" "$log"; then
    echo "tsan: $1 on $2 ranks ($3): clean"
  else
    echo "tsan: $1 on $2 ranks ($3): FAILED (see $log)"; grep -A20 "WARNING: ThreadSanitizer" "$log" | head -60 || tail -20 "$log"
    fail=1
  fi
done
# libweft-mpi.so preloaded (the shared TSan runtime first): its request
# records pass between the program's thread, Weft's engine (the completion
# callback releases the Weft request) and the keeper thread (frees and starts
# MPICH's generalized requests). The overlap benchmark's device-style compute
# makes the callbacks run on the engine, so the keeper runs; the threads test
# makes calls from three program threads at once.
tsan_rt=$(gcc -print-file-name=libtsan.so)
for t in "calls 2 interpose_test_mpi_calls" "threads 2 interpose_test_mpi_threads --iters 60" \
         "overlap 2 mpi_overlap -m 64K:256K -i 20 --compute device --entry mpi"; do
  set -- $t
  name=$1 ranks=$2
  shift 2
  prog=$1
  shift
  log="$dir/tsan-interpose-$name-$ranks.log"
  path="$dir/tests/interpose/$prog"
  [ "$prog" = mpi_overlap ] && path="$dir/benchmarks/$prog"
  if WEFT_TIMEOUT=120 timeout 300 mpiexec -n "$ranks" -genv LD_PRELOAD "$tsan_rt:$dir/interpose/libweft-mpi.so" \
       "$path" "$@" >"$log" 2>&1 && ! grep -q "WARNING: ThreadSanitizer" "$log"; then
    echo "tsan: interposer, $name on $ranks ranks: clean"
  else
    echo "tsan: interposer, $name on $ranks ranks: FAILED (see $log)"
    grep -A20 "WARNING: ThreadSanitizer" "$log" | head -60 || tail -20 "$log"
    fail=1
  fi
done
exit $fail
