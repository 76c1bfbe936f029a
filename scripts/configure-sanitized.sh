#!/usr/bin/env bash
# Configures the one clang-14 ASan + UBSan build (-O1 -g1: sanitizer builds at -O3 take far longer
# to compile for little extra coverage) into DIR, with the libFuzzer targets (fuzz/) beside the
# test suite, so that scripts/test-sanitizers.sh and scripts/fuzz.sh share one build (build-asan).
# Per-test timeouts x3 (tests/CMakeLists.txt): the suite runs the model 10-15x slower here.
# Extra CMake arguments follow. Run after `scripts/setup.sh --clang`.
#   scripts/configure-sanitized.sh DIR [CMAKE_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
GEN=()
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
cmake -S . -B "$dir" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DNEEDLE_SANITIZE=address,undefined -DNEEDLE_BUILD_FUZZERS=ON -DNEEDLE_TEST_TIMEOUT_FACTOR=3 \
  "$@" >/dev/null
