#!/usr/bin/env bash
# Tests the WASM build under node: builds it (scripts/build-wasm.sh), then
#   1. kernel bit-exactness: the kernel tests (Catch2, compiled to wasm) hold every table of the
#      module, simd128 included, to the scalar reference;
#   2. end to end through the official npm wrapper: our needle.js/needle.wasm dropped into a copy
#      of @tyler71/cactus-needle2 must answer like native `build/needle run` (built with
#      scripts/build.sh if absent), like the engine's session goldens and like the official wasm
#      itself, turn by turn (scripts/wasm-envelopes.mjs);
#   3. speed against the official wasm in the same node process (scripts/bench-wasm.mjs; reported,
#      not enforced: this machine is shared).
# Prints the seconds of every step; exits non-zero if any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$SECONDS
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== test-wasm: $name"
  "$@"
  echo "=== test-wasm: $name done in $((SECONDS - t0)) s"
}

step "build (emscripten)" bash scripts/build-wasm.sh
if [ ! -x build/needle ]; then
  step "build native needle" bash -c 'NEEDLE_CMAKE_ARGS= bash scripts/build.sh >/dev/null'
fi

# The official package from npm (cached in build-wasm/npm), and a copy with our module inside.
pkg=@tyler71/cactus-needle2
npm_dir=build-wasm/npm
fetch_official() {
  if [ ! -f "$npm_dir/node_modules/$pkg/src/needle.mjs" ]; then
    mkdir -p "$npm_dir"
    (cd "$npm_dir" && { [ -f package.json ] || npm init -y >/dev/null; } &&
      npm install --no-audit --no-fund "$pkg" >/dev/null)
  fi
  rm -rf build-wasm/pkg-ours
  cp -r "$npm_dir/node_modules/$pkg" build-wasm/pkg-ours
  cp build-wasm/needle.js build-wasm/needle.wasm build-wasm/pkg-ours/vendor/wasm/
}
step "npm package (official, and ours inside a copy)" fetch_official

step "kernel tests (node)" node build-wasm/needle_kernel_tests.js
step "envelopes: ours = native = official (npm wrapper)" \
  node scripts/wasm-envelopes.mjs build-wasm/pkg-ours "$npm_dir/node_modules/$pkg" build/needle \
  --official-turns 8
step "speed: ours vs the official wasm" \
  node scripts/bench-wasm.mjs build-wasm/pkg-ours "$npm_dir/node_modules/$pkg"
echo "=== test-wasm: all passed in $((SECONDS - t_start)) s"
