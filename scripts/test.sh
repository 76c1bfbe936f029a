#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (warnings are errors), then runs every
# test through CTest. Lint (clang-format, clang-tidy) is scripts/lint.sh; CI runs it after this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NEEDLE_CMAKE_ARGS="-DNEEDLE_WERROR=ON" bash scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
