#!/usr/bin/env bash
# Enforced style and static checks: clang-format (Google base, 100 columns) on every C++ file and
# clang-tidy (.clang-tidy) on lib/ and apps/.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'lib/*.cpp' 'lib/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h')
echo "lint: clang-format on ${#files[@]} files"
clang-format --dry-run --Werror "${files[@]}"
# Each file against a configuration that compiles it, one compile_commands.json entry per source
# (the builds compile unity batches; clang-tidy also cannot read GCC's precompiled headers):
# lint configures its own trees without either, and builds only their generated header:
#   build/tidy          the host's Release configuration (x86: every x86 ISA file)
#   build-aarch64/tidy  the aarch64 cross configuration (cmake/toolchain-aarch64.cmake), for the
#                       ISA files of lib/kernels/arm/; needs the cross compiler (scripts/setup.sh
#                       --aarch64). Without it the ARM files are left out, unless
#                       NEEDLE_LINT_REQUIRE_AARCH64=1 (set by .ci/run): then it is an error, so that
#                       CI never passes with the ARM files unchecked.
tidy_db() {  # tidy_db DIR CMAKE_ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release -DNEEDLE_UNITY_BUILD=OFF \
    -DNEEDLE_PCH=OFF "$@" >/dev/null
  cmake --build "$dir" --target needle_git_commit >/dev/null
}
tidy_db build/tidy
if command -v aarch64-linux-gnu-g++ >/dev/null; then
  tidy_db build-aarch64/tidy -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
elif [ "${NEEDLE_LINT_REQUIRE_AARCH64:-0}" = 1 ]; then
  echo "lint: no aarch64-linux-gnu-g++ for the ARM files (scripts/setup.sh --aarch64)"
  exit 1
fi
tidy=()
other=()
while IFS= read -r f; do
  if grep -qF "\"file\": \"$PWD/$f\"" build/tidy/compile_commands.json; then tidy+=("$f"); else other+=("$f"); fi
done < <(git ls-files 'lib/*.cpp' 'apps/*.cpp')
echo "lint: clang-tidy on ${#tidy[@]} files"
printf '%s\n' "${tidy[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p build/tidy --quiet 2>/dev/null
arm=()
untidied=()
for f in "${other[@]}"; do
  if [ -f build-aarch64/tidy/compile_commands.json ] &&
    grep -qF "\"file\": \"$PWD/$f\"" build-aarch64/tidy/compile_commands.json; then
    arm+=("$f")
  else
    untidied+=("$f")  # e.g. lib/kernels/wasm/ (emscripten's em++ is not a clang-tidy driver)
  fi
done
if [ ${#arm[@]} -gt 0 ]; then
  echo "lint: clang-tidy on ${#arm[@]} files of the aarch64 build"
  printf '%s\n' "${arm[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p build-aarch64/tidy --quiet 2>/dev/null
fi
if [ ${#untidied[@]} -gt 0 ]; then echo "lint: not in these builds, not tidied: ${untidied[*]}"; fi
echo "lint: ok"
