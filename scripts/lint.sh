#!/usr/bin/env bash
# Enforced style and static checks: clang-format (Google base, 100 columns) on every C++ file and
# clang-tidy (.clang-tidy) on lib/ and apps/. Needs a configured build (compile_commands.json).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'lib/*.cpp' 'lib/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h')
echo "lint: clang-format on ${#files[@]} files"
clang-format --dry-run --Werror "${files[@]}"
# Each file against the build that compiles it: ISA files of another architecture (lib/kernels/arm/
# on x86) are not in build/'s compile_commands.json; they are checked against the cross build's
# (scripts/test-aarch64.sh configures it) when that exists; NEEDLE_LINT_REQUIRE_AARCH64=1 (set by
# .ci/run) makes its absence an error, so that CI never passes with the ARM files left unchecked.
if [ "${NEEDLE_LINT_REQUIRE_AARCH64:-0}" = 1 ] && [ ! -f build-aarch64/compile_commands.json ]; then
  echo "lint: no build-aarch64/compile_commands.json (the aarch64 job configures it)"
  exit 1
fi
# tidy_db BUILD: BUILD/tidy/compile_commands.json, BUILD's without the precompiled-header flags
# (cmake/pch.cmake): clang-tidy cannot read GCC's .gch, and each file includes its headers itself.
tidy_db() {
  mkdir -p "$1/tidy"
  python3 - "$1/compile_commands.json" "$1/tidy/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["command"] = re.sub(r" -Winvalid-pch| -include \S*cmake_pch\.hxx", "", e["command"])
json.dump(entries, open(sys.argv[2], "w"), indent=1)
PY
}
tidy_db build
[ ! -f build-aarch64/compile_commands.json ] || tidy_db build-aarch64
tidy=()
other=()
while IFS= read -r f; do
  if grep -qF "\"file\": \"$PWD/$f\"" build/compile_commands.json; then tidy+=("$f"); else other+=("$f"); fi
done < <(git ls-files 'lib/*.cpp' 'apps/*.cpp')
echo "lint: clang-tidy on ${#tidy[@]} files"
printf '%s\n' "${tidy[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p build/tidy --quiet 2>/dev/null
arm=()
untidied=()
for f in "${other[@]}"; do
  if [ -f build-aarch64/compile_commands.json ] &&
    grep -qF "\"file\": \"$PWD/$f\"" build-aarch64/compile_commands.json; then
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
