#!/usr/bin/env bash
# The README's main-job command: installs dependencies, builds, then runs needle's main jobs on
# the bundled models: inspect and verify the random-weight model in the exact official layout,
# answer queries with the trained demo model (examples/demo.cact, python/README.md) and score it
# on its held-out set, and a short benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
NEEDLE_CMAKE_ARGS="-DNEEDLE_WERROR=ON" bash scripts/build.sh  # same flags as scripts/test.sh: one build
MODEL=tests/data/models/official-geometry.cact
set -x
./build/needle inspect "$MODEL"
./build/needle verify "$MODEL" --golden tests/data/golden/official/golden.json
if [[ -f examples/demo.cact ]]; then  # the trained demo model (python/README.md "Runs so far")
  ./build/needle run examples/demo.cact --tools examples/demo-tools.json \
    "Text Nadia that the train is late, then play Stand By Me."
  ./build/needle run examples/demo.cact --tools examples/demo-tools.json \
    "What's the weather in Santiago in celsius?"
  ./build/needle eval examples/demo.cact examples/demo-heldout.jsonl | sed -n 1,12p
else
  ./build/needle run tests/data/models/small-crafted-0.5.cact --tools examples/tools.json \
    "Turn off the kitchen lights." -n 96
fi
./build/needle bench "$MODEL" -t 1 -p 100 -n 32 -r 3 --numerics official,f32
