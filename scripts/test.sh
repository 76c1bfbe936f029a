#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (warnings are errors), checks format
# and clang-tidy, then runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NEEDLE_CMAKE_ARGS="-DNEEDLE_WERROR=ON" bash scripts/build.sh
bash scripts/lint.sh
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
