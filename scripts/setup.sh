#!/usr/bin/env bash
# Installs every build, test and benchmark dependency from Debian packages (Debian 12 /
# Raspberry Pi OS); third_party/dependencies.cmake says what each library is for; dpkg-dev,
# file and man-db serve the .deb (dpkg-shlibdeps computes its Depends) and the package tests;
# wamerican (a word list, 1 MB) the training data generator's --dict-words and its test; lld
# links the binary with its run-path code packed (cmake/text-order.txt), which valgrind's
# callgrind regenerates (scripts/gen-text-order.sh).
# Run as root or with sudo. Nothing is downloaded outside apt. One apt-get run for everything
# asked for, so that callers (CI) install once up front and jobs run side by side never race
# for the dpkg lock.
#   scripts/setup.sh [--clang] [--aarch64] [--wasm] [--torch] [--all]
#   --clang    also clang-14, its sanitizer runtimes and the LLVM OpenMP runtime (clang cannot
#              use GCC's libgomp): scripts/test-sanitizers.sh, scripts/fuzz.sh
#   --aarch64  also the AArch64 cross compiler, qemu-user and the arm64 runtime of fmt, spdlog and
#              OpenMP (Debian multiarch: adds the arm64 architecture to dpkg first; the host's
#              header-only CLI11, nlohmann-json and Catch2 v2 serve both builds):
#              scripts/test-aarch64.sh
#   --wasm     also Debian's emscripten, node and npm (each only when its command is missing: a
#              node from elsewhere, e.g. NodeSource's, brings its own npm and conflicts with
#              Debian's): scripts/build-wasm.sh, scripts/test-wasm.sh
#   --torch    also Debian's PyTorch (CPU) for the training extra, python/needle_torch: its
#              forward pass, training and export (python/README.md); never needed by the core
#              build or tests (their torch tests are registered only when torch imports). With
#              it the single-threaded OpenBLAS: Debian's torch calls the system BLAS, and the
#              reference libblas3 is 4-7x slower on the training's matrix products
#   --all      --clang and --aarch64 (what .ci/run's jobs need)
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(build-essential cmake ninja-build pkg-config
      libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev catch2
      python3 python3-numpy python3-sentencepiece python3-jsonschema clang-format clang-tidy
      dpkg-dev file man-db wamerican lld valgrind)
CLANG_PKGS=(clang-14 libclang-rt-14-dev libomp-14-dev)
TORCH_PKGS=(python3-torch libopenblas0-serial)
AARCH64_PKGS=(g++-aarch64-linux-gnu qemu-user libfmt-dev:arm64 libspdlog-dev:arm64 libgomp1:arm64)
aarch64=0
wasm=0
for option in "$@"; do
  case "$option" in
    --clang) PKGS+=("${CLANG_PKGS[@]}") ;;
    --aarch64) PKGS+=("${AARCH64_PKGS[@]}"); aarch64=1 ;;
    --wasm) wasm=1 ;;
    --torch) PKGS+=("${TORCH_PKGS[@]}") ;;
    --all) PKGS+=("${CLANG_PKGS[@]}" "${AARCH64_PKGS[@]}"); aarch64=1 ;;
    *) echo "setup: unknown option $option (--clang, --aarch64, --wasm, --torch, --all)" >&2; exit 2 ;;
  esac
done
need_update=0
if [ "$aarch64" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup: dpkg --add-architecture arm64"
  $SUDO dpkg --add-architecture arm64
  need_update=1  # the arm64 package lists are not there yet
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$wasm" = 1 ]; then
  command -v emcc >/dev/null || missing+=(emscripten)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
else
  if [ "$need_update" = 1 ]; then $SUDO apt-get update; fi
  echo "setup: all Debian packages present"
fi
