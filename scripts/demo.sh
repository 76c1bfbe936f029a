#!/usr/bin/env bash
# The README's main-job command: installs dependencies, builds, and runs needle on the bundled
# official-geometry model (random weights, exact official layout).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
MODEL=tests/data/models/official-geometry.cact
set -x
./build/needle inspect "$MODEL"
