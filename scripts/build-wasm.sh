#!/usr/bin/env bash
# Builds libneedle for WebAssembly into ./build-wasm: needle.js + needle.wasm (a drop-in for the
# npm package @tyler71/cactus-needle2's vendor/wasm/ files) and the node-run kernel tests
# (build-wasm/needle_kernel_tests.js). Uses Debian's emscripten (installed with apt-get when
# missing) and the header-only Debian packages the native build uses.
# Usage: bash scripts/build-wasm.sh [TARGET...]   (default: every wasm target)
# Extra CMake arguments may be given in NEEDLE_WASM_CMAKE_ARGS; NEEDLE_WASM_JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
missing=()
command -v emcmake >/dev/null || missing+=(emscripten)
for pkg in nlohmann-json3-dev libfmt-dev libspdlog-dev catch2 cmake ninja-build; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-wasm: installing with apt-get: ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

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
