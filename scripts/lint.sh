#!/usr/bin/env bash
# Enforced style and static checks: clang-format (Google base, 100 columns) on every C++ file and
# clang-tidy (.clang-tidy) on lib/ and apps/. Needs a configured build (compile_commands.json).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'lib/*.cpp' 'lib/*.h' 'apps/*.cpp' 'apps/*.h' 'tests/*.cpp' 'tests/*.h')
echo "lint: clang-format on ${#files[@]} files"
clang-format --dry-run --Werror "${files[@]}"
# *_simd128.cpp are WebAssembly-only (not in the native build's compile_commands.json).
mapfile -t tidy < <(git ls-files 'lib/*.cpp' 'apps/*.cpp' | grep -v '_simd128\.cpp$')
echo "lint: clang-tidy on ${#tidy[@]} files"
printf '%s\n' "${tidy[@]}" | xargs -P "$(nproc)" -n 4 clang-tidy -p build --quiet 2>/dev/null
echo "lint: ok"
