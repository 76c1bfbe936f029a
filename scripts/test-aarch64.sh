#!/usr/bin/env bash
# Cross-builds needle for 64-bit ARM (Debian's g++-aarch64-linux-gnu, cmake/toolchain-aarch64.cmake)
# into build-aarch64/ and runs it under user-mode emulation (qemu-aarch64) on three CPU models:
#   max         every extension qemu has (dotprod included): the tests below, all ISA tables
#   cortex-a76  the Raspberry Pi 5's core (NEON + dotprod, no SVE / i8mm): the same tests
#   cortex-a72  a core without SDOT (Raspberry Pi 4): detection must pick neon, kernel tests
# The tests (Catch2 tags, in build-aarch64/tests/needle_tests): [kernels] (integer CQ gemm / gemv,
# quantizers, int8 dot, attention, vmath, every table against the scalar reference bit for bit),
# [quant] (FWHT per ISA, CQ codec), [libm] (the musl ports against the engine's own values),
# [model] (the engine's first-step logits bit for bit, every ISA and thread count; official state
# dumps: K/V codes, scales, rings), [session] / [golden] (whole turns: the engine's envelopes) and
# [report]; then `needle verify --golden` on the three fixture models with --isa dotprod and neon.
# Results on ARM must equal x86 bit for bit: the goldens are the same files. Exit 0 only if every
# step passes. Prints each step's elapsed seconds. Installs what it needs with apt-get (as root or
# with sudo): the cross compiler, qemu-user and the arm64 runtime of fmt, spdlog and OpenMP (multiarch).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
BUILD=build-aarch64
START=$(date +%s)
step_start=0
step() {  # step NAME: prints the previous step's time, then the new step's name
  local now
  now=$(date +%s)
  if [ "$step_start" -ne 0 ]; then echo "== ${STEP_NAME}: $((now - step_start)) s"; fi
  STEP_NAME="$1"
  step_start=$now
  echo "== $1"
}

step "install (host build tools, cross compiler, qemu-user, arm64 fmt/spdlog)"
bash scripts/setup.sh
PKGS=(g++-aarch64-linux-gnu qemu-user libfmt-dev:arm64 libspdlog-dev:arm64 libgomp1:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "test-aarch64: dpkg --add-architecture arm64"
  $SUDO dpkg --add-architecture arm64
  NEED_UPDATE=1
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test-aarch64: installing ${missing[*]}"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
elif [ -n "${NEED_UPDATE:-}" ]; then
  $SUDO apt-get update
fi
echo "test-aarch64: $(aarch64-linux-gnu-g++ --version | head -1); $(qemu-aarch64 --version | head -1)"

step "cross build (needle, needle_tests) into $BUILD/"
GEN=()
if [ ! -f "$BUILD/CMakeCache.txt" ]; then GEN=(-G Ninja); fi
# Only the test files of the tags run below (the others would only cost build time here).
TEST_FILES="attention_i8;kernels_i8;kernels;libm;model;model_geometry;official_paths"
TEST_FILES+=";official_state;quant;report;session;session_v2;vmath"
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
  -DCMAKE_BUILD_TYPE=Release -DNEEDLE_WERROR=ON "-DNEEDLE_TEST_FILES=$TEST_FILES" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target needle needle_tests
aarch64-linux-gnu-readelf -h "$BUILD/needle" | grep -q "AArch64" ||
  { echo "test-aarch64: not an AArch64 binary"; exit 1; }
# Nothing x86 in the ARM objects, and SDOT only in the dotprod files: the baseline build must run
# on any AArch64 CPU.
if aarch64-linux-gnu-objdump -d "$BUILD/needle" | grep -q "sdot"; then
  aarch64-linux-gnu-nm -C "$BUILD/needle" | grep -q "CqGemmI8Dotprod" ||
    { echo "test-aarch64: SDOT without the dotprod kernels"; exit 1; }
else
  echo "test-aarch64: no SDOT in the binary (the dotprod kernels are missing)"
  exit 1
fi

QEMU=(qemu-aarch64)
TESTS="$BUILD/tests/needle_tests"
# Every test of these tags except the one that spawns the needle binary (a child process cannot
# be an AArch64 executable without binfmt_misc, which this machine does not have).
SPEC='[kernels],[quant],[libm],[report],[session],[golden],[model]~"needle verify passes tiny with its golden and fails a too-strict tolerance"'
run_tests() {  # run_tests CPU SPEC: needle_tests under qemu; the summary, or the failures
  local log="$BUILD/needle_tests-$1.log"
  if ! QEMU_CPU=$1 "${QEMU[@]}" "$TESTS" "$2" >"$log" 2>&1; then
    tail -80 "$log"
    echo "test-aarch64: needle_tests failed on -cpu $1 (whole log: $log)"
    exit 1
  fi
  tail -3 "$log"
}
verify_fixtures() {  # verify_fixtures CPU ISA: needle verify --golden on the three fixture models
  local cpu=$1 isa=$2 m
  for m in tiny small official; do
    local model=tests/data/models/$m.cact
    [ "$m" = official ] && model=tests/data/models/official-geometry.cact
    out=$(QEMU_CPU=$cpu "${QEMU[@]}" "$BUILD/needle" verify "$model" \
      --golden "tests/data/golden/$m/golden.json" --isa "$isa" -t 2)
    echo "$out" | grep -E "^isa|official [0-9]+:|^PASS|^FAIL" | sed "s/^/  [$cpu $isa $m] /"
    echo "$out" | grep -q "^isa *$isa " || { echo "test-aarch64: verify did not use $isa"; exit 1; }
    echo "$out" | tail -1 | grep -qx PASS || { echo "test-aarch64: verify $m failed"; exit 1; }
  done
}
best_isa() {  # best_isa CPU: the table needle picks by itself on that CPU model
  QEMU_CPU=$1 "${QEMU[@]}" "$BUILD/needle" verify tests/data/models/tiny.cact | awk '/^isa/{print $2}'
}

for cpu in max cortex-a76; do
  step "qemu -cpu $cpu: needle_tests $SPEC"
  best=$(best_isa "$cpu")
  echo "test-aarch64: -cpu $cpu: best ISA $best"
  [ "$best" = dotprod ] || { echo "test-aarch64: expected dotprod on $cpu"; exit 1; }
  run_tests "$cpu" "$SPEC"
  step "qemu -cpu $cpu: needle verify --golden (dotprod, neon)"
  verify_fixtures "$cpu" dotprod
  verify_fixtures "$cpu" neon
done

step "qemu -cpu cortex-a72 (no SDOT): detection and kernel tests"
best=$(best_isa cortex-a72)
echo "test-aarch64: -cpu cortex-a72: best ISA $best"
[ "$best" = neon ] || { echo "test-aarch64: expected neon on cortex-a72"; exit 1; }
if QEMU_CPU=cortex-a72 "${QEMU[@]}" "$BUILD/needle" verify tests/data/models/tiny.cact \
  --isa dotprod >/dev/null 2>&1; then
  echo "test-aarch64: --isa dotprod accepted on a CPU without SDOT"
  exit 1
fi
run_tests cortex-a72 "[kernels],[quant]"
verify_fixtures cortex-a72 neon

step "done"
echo "test-aarch64: all passed in $(($(date +%s) - START)) s"
