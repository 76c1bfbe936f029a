#!/usr/bin/env bash
# The README's main-job command: installs dependencies, builds, then runs needle's main jobs on
# the bundled models (random weights in the exact official layout): inspect, verify against the
# goldens, answer a query with the engine's protocol, and a short benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NEEDLE_CMAKE_ARGS="-DNEEDLE_WERROR=ON" bash scripts/build.sh  # same flags as scripts/test.sh: one build
MODEL=tests/data/models/official-geometry.cact
set -x
./build/needle inspect "$MODEL"
./build/needle verify "$MODEL" --golden tests/data/golden/official/golden.json
./build/needle run tests/data/models/small-crafted-0.5.cact --tools examples/tools.json \
  "Turn off the kitchen lights." -n 96
./build/needle bench "$MODEL" -t 1 -p 100 -n 32 -r 3 --numerics official,f32
