#!/usr/bin/env bash
# The suite's memory checks: unit tests, a selection of the multi-rank tests
# (each program once, both transports, power-of-two and not), the fast Loom
# tests, the fuzzers' corpora and the LD_PRELOAD benchmark, built with
# AddressSanitizer + UndefinedBehaviorSanitizer (use after free, overflows,
# leaks, undefined behaviour are bugs). See doc/testing.md.
# Usage: bash scripts/asan.sh [BUILD_DIR]   (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-asan}
rm -rf "$dir"
# b_lundef=false: the sanitizer runtimes are shared libraries that the
# shared libweft leaves undefined.
meson setup "$dir" -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized >/dev/null
# UCX's memory hooks patch malloc/mmap, which fights ASan's interceptors.
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
# Leaks are errors (LSan runs at each process exit), except inside MPICH/UCX.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Meson test names: each multi-rank program once (tests/mpi/meson.build),
# chosen to cover both transports and 2, 3 and 4 ranks; the unit and
# fuzz-replay suites are added whole below. A new multi-rank program adds
# its name here. Names absent from this configuration (no UCX, no Loom) are
# skipped.
tests=(
  errors-n2-default watchdog-n2
  inflight-n2-default
  allreduce-n3-auto-tpmpi allreduce-n3-ring-chunk allreduce-n4-rabenseifner allreduce-n3-tree-ucx
  transport-n3-mpi transport-n2-ucx
  stream-n3-default
  coll-n3-default vcoll-n3-default vcoll-n4-tpmpi
  # the hierarchical algorithms on test nodes (WEFT_NODE_RANKS)
  allreduce-n4-nodes2x2 coll-n3-nodes3x1
  p2p-n3-default p2p-n2-tpmpi
  halo-n3-default halo-n4-tpmpi
  embed-n3-default embed-n2-tpmpi
  handles-n2-default handles-n3-tpmpi asym-n3-default asym-n3-check avg-n3-default
  comm_transport-n4-default comm_transport-n2-ucxbad
  profile-n2
  # Loom: the fast ones (overfit and the CLI runs take minutes under ASan)
  loom_grad loom_conv_ref loom_idx loom_idx_corrupt loom_checkpoint loom_determinism
  loom_mesh loom_dp-n2 loom_spatial-n4
  # the lab program that preloads the UCX probe (benchmarks/lab/meson.build
  # puts libasan first in LD_PRELOAD in this build) and one plain smoke run
  lab-weft_lat_split-smoke bench-weft_osu_halo-smoke
  # libweft-mpi.so preloaded (libasan first: tests/interpose/meson.build),
  # whose completion callbacks call MPICH from the engine thread
  interpose-calls-n2 interpose-threads-n2
)
# Build only what the selected tests run (the programs and what they depend
# on), not every benchmark and tool.
targets=$(python3 - "$dir" "${tests[@]}" <<'PY'
import json, os, subprocess, sys
d, wanted = sys.argv[1], set(sys.argv[2:])
intro = lambda what: json.loads(subprocess.run(['meson', 'introspect', d, what],
                                               check=True, capture_output=True).stdout)
outputs = {t['id']: t['filename'] for t in intro('--targets')}
root = os.path.realpath(d)
names, files = [], set()
for t in intro('--tests'):
    if t['name'] in wanted or set(t['suite']) & {'weft:unit', 'weft:fuzz-replay'}:
        names.append(t['name'])
        files.update(f for f in t['cmd'] if os.path.realpath(f).startswith(root + '/'))
        for dep in t['depends']:
            files.update(outputs.get(dep, []))
print(' '.join(names))
print(' '.join(os.path.relpath(f, root) for f in sorted(files)))
PY
)
run=($(sed -n 1p <<<"$targets"))
echo "asan: building and running ${#run[@]} tests under ASan+UBSan in $dir"
ninja -C "$dir" -j"$(nproc)" $(sed -n 2p <<<"$targets") >/dev/null
rc=0
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 "${run[@]}" || rc=$?
log="$dir/meson-logs/testlog.txt"
# A sanitizer report fails its test through the exit code already; grep the
# log too, so that a report from a process whose status the launcher lost
# (a rank other than the one mpiexec returns) still fails the run.
if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: " "$log"; then
  echo "asan: sanitizer reports in $log:"
  grep -E -A12 "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error: " "$log" | head -80
  rc=1
fi
[ "$rc" -eq 0 ] && echo "asan: clean (${#run[@]} tests)"
exit "$rc"
