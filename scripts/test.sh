#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every test through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
