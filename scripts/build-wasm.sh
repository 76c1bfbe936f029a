#!/usr/bin/env bash
# Builds libneedle for WebAssembly into ./build-wasm: needle.js + needle.wasm (a drop-in for the
# npm package @tyler71/cactus-needle2's vendor/wasm/ files) and the node-run kernel tests
# (build-wasm/needle_kernel_tests.js). Uses Debian's emscripten (installed with apt-get when
# missing, through scripts/setup.sh --wasm) and the header-only Debian packages the native build
# uses.
# Usage: bash scripts/build-wasm.sh [TARGET...]   (default: every wasm target)
# Extra CMake arguments may be given in NEEDLE_WASM_CMAKE_ARGS; NEEDLE_WASM_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --wasm
for tool in emcmake emcc node; do
  command -v "$tool" >/dev/null || { echo "build-wasm: $tool is missing after setup" >&2; exit 1; }
done

# Debian's emscripten runs its JS tools with the system node; a node from elsewhere (e.g.
# NodeSource) does not search Debian's module folder, where acorn lives.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"

if [ ! -f build-wasm/CMakeCache.txt ]; then
  # shellcheck disable=SC2086
  emcmake cmake -S . -B build-wasm -G Ninja -DCMAKE_BUILD_TYPE=Release \
    ${NEEDLE_WASM_CMAKE_ARGS:-} >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-wasm -j "${NEEDLE_WASM_JOBS:-2}" "${targets[@]}"
ls -l build-wasm/needle.js build-wasm/needle.wasm 2>/dev/null || true
