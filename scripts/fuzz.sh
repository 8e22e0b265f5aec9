#!/usr/bin/env bash
# Fuzz every parser with libFuzzer for a bounded time: the tuning file, the
# WEFT_* environment, halo plan parameters, Loom's IDX reader (doc/testing.md).
# Built with clang in its own build directory, ASan + UBSan, the library
# instrumented for coverage. Each fuzzer starts from tests/fuzz/corpus/NAME
# (read-only: new inputs go to a scratch copy under the build directory) and
# runs FUZZ_SECONDS (default 20); a crash, a leak, a sanitizer report or a
# failed check stops it and fails the script, leaving the input in
# BUILD_DIR/crashes/NAME/ - copy it into tests/fuzz/corpus/NAME/ once the bug
# is fixed, so that the normal suite (fuzz-replay) replays it for good.
# Usage: bash scripts/fuzz.sh [BUILD_DIR] [NAME...]   (default: build-fuzz, all)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-fuzz}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(tuning config halo idx)
secs=${FUZZ_SECONDS:-20}
rm -rf "$dir"
CC=clang meson setup "$dir" -Dbuildtype=debugoptimized -Dfuzz=enabled \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link >/dev/null
ninja -C "$dir" -j"$(nproc)" $(printf 'tests/fuzz/fuzz_%s ' "${names[@]}") >/dev/null
export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
export ASAN_OPTIONS="detect_leaks=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
fail=0
for n in "${names[@]}"; do
  work="$dir/corpus-work/$n" crashes="$dir/crashes/$n" log="$dir/fuzz-$n.log"
  mkdir -p "$work" "$crashes"
  opts=() asan=$ASAN_OPTIONS
  if [ "$n" = halo ]; then
    # A plan for a huge tensor asks for staging in proportion (GiB, and
    # ASan writes the shadow of all of it): here any malloc over 512 MiB
    # returns NULL instead, and Weft must refuse the plan with
    # WEFT_ERR_NO_MEMORY (the harness checks it does).
    asan="$ASAN_OPTIONS:allocator_may_return_null=1:max_allocation_size_mb=512"
  fi
  start=$(date +%s)
  if ASAN_OPTIONS=$asan "$dir/tests/fuzz/fuzz_$n" "${opts[@]}" \
       -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
       -max_len=4096 -print_final_stats=1 -artifact_prefix="$crashes/" \
       "$work" "tests/fuzz/corpus/$n" >"$log" 2>&1; then
    stats=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
    cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1)
    echo "fuzz: $n clean ($((${stats:-0})) inputs in $(( $(date +%s) - start )) s, ${cov:-cov: ?})"
  else
    echo "fuzz: $n FAILED (see $log; input saved in $crashes/)"
    grep -E -A25 "ERROR: |runtime error|FUZZ_ASSERT|deadly signal|out-of-memory|timeout" "$log" | head -60
    fail=1
  fi
done
exit $fail
