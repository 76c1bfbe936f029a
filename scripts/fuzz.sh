#!/usr/bin/env bash
# libFuzzer targets (fuzz/fuzz_*.cpp) under ASan + UBSan: builds them with clang-14 into
# ./build-asan (the same build as scripts/test-sanitizers.sh; only the fuzz targets are built
# here), replays the regression corpus (fuzz/regressions/<target>/), then runs each target for
# SECONDS (default 60) from seeds made from tests/data, NEEDLE_JOBS (default: nproc) targets side
# by side. Prints each target's executions and time; exits non-zero on any crash, leak, sanitizer
# report or timeout. Crash inputs are written to build-asan/artifacts/<target>/; keep one by
# copying it to fuzz/regressions/<target>/.
#   scripts/fuzz.sh [SECONDS]        e.g. scripts/fuzz.sh 3600 for an hour per target
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
bash scripts/setup.sh --clang
JOBS=${NEEDLE_JOBS:-$(nproc)}
B=build-asan
t0=$SECONDS
bash scripts/configure-sanitized.sh "$B"
cmake --build "$B" -j "$JOBS" --target needle_fuzzers
echo "fuzz: build done in $((SECONDS - t0)) s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
work=$(mktemp -d "${TMPDIR:-/tmp}/needle-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$B"/fuzz/make_seeds "$work/seeds" >/dev/null
mapfile -t targets < <(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')
if [ ${#targets[@]} -eq 0 ]; then echo "fuzz: no fuzz/fuzz_*.cpp targets found"; exit 1; fi
failed=()
# 1. Regression corpus: every input once.
for t in "${targets[@]}"; do
  reg=fuzz/regressions/$t
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    n=$(find "$reg" -type f | wc -l)
    if "$B"/fuzz/"$t" -runs=0 "$reg"/* >"$work/$t.reg.log" 2>&1; then
      echo "fuzz: $t regressions: $n inputs ok"
    else
      echo "fuzz: $t regressions FAILED:"; tail -40 "$work/$t.reg.log"; failed+=("$t(regression)")
    fi
  fi
done
# 2. Each target for SECS seconds, JOBS at a time. Large seeds (models) cap the input length.
fuzz_one() {
  local t=$1 art=$B/artifacts/$1 t1=$SECONDS status=ok execs cov
  mkdir -p "$art" "$work/corpus/$t" "$work/seeds/$t"
  if ! "$B"/fuzz/"$t" -max_total_time="$SECS" -timeout=60 -rss_limit_mb=2560 \
      -print_final_stats=1 -artifact_prefix="$art/" "$work/corpus/$t" "$work/seeds/$t" \
      >"$work/$t.log" 2>&1; then
    status=CRASH
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$work/$t.log" | tail -1 || true)
  {
    echo "fuzz: $t: $status, ${execs} executions in $((SECONDS - t1)) s (${cov:-cov: ?})"
    if [ "$status" != ok ]; then
      grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$work/$t.log" | head -20 || true
      tail -60 "$work/$t.log"
    fi
  } >"$work/$t.summary"
  echo "$status" >"$work/$t.status"
}
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
for t in "${targets[@]}"; do
  cat "$work/$t.summary" 2>/dev/null || echo "fuzz: $t: no result"
  [ "$(cat "$work/$t.status" 2>/dev/null)" = ok ] || failed+=("$t")
done
echo "fuzz: total $((SECONDS - t0)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $B/artifacts/<target>/)"
  exit 1
fi
echo "fuzz: ok"
