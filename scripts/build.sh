#!/usr/bin/env bash
# Configures and builds needle (Release, -O3, no -march=native) into ./build.
# Extra CMake arguments may be given in NEEDLE_CMAKE_ARGS (e.g. -DNEEDLE_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
GEN=()
if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then GEN=(-G Ninja); fi
# shellcheck disable=SC2086
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release ${NEEDLE_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$(nproc)"
