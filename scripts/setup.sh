#!/usr/bin/env bash
# Installs every build, test and benchmark dependency from Debian packages (Debian 12 /
# Raspberry Pi OS). Run as root or with sudo. Nothing is downloaded outside apt.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(build-essential cmake ninja-build pkg-config
      libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev catch2
      python3 python3-numpy python3-sentencepiece clang-format clang-tidy)
# --clang: also clang-14, its sanitizer runtimes and the LLVM OpenMP runtime (clang cannot use
# GCC's libgomp), for scripts/test-sanitizers.sh and scripts/fuzz.sh.
# --wasm: also Debian's emscripten, node and npm (each only when its command is missing: a node
# from elsewhere, e.g. NodeSource's, brings its own npm and conflicts with Debian's), for
# scripts/build-wasm.sh and scripts/test-wasm.sh.
wasm=0
for option in "$@"; do
  case "$option" in
    --clang) PKGS+=(clang-14 libclang-rt-14-dev libomp-14-dev) ;;
    --wasm) wasm=1 ;;
    *) echo "setup: unknown option $option (--clang, --wasm)" >&2; exit 2 ;;
  esac
done
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
  echo "setup: all Debian packages present"
fi
