#!/usr/bin/env bash
# Cross-builds needle for 64-bit ARM (Debian's g++-aarch64-linux-gnu, cmake/toolchain-aarch64.cmake)
# into build-aarch64/ and runs it under user-mode emulation (qemu-aarch64) on three CPU models:
#   max         every extension qemu has (SDOT included): ISA detection (dotprod), [kernels]
#               (integer CQ gemm / gemv, quantizers, int8 dot, attention, vmath: every table --
#               scalar, neon, dotprod -- against the scalar reference bit for bit), [quant] (FWHT
#               per ISA, CQ codec), [libm] (the musl ports against the engine's own values), [report],
#               the engine's first-step logits bit for bit with every ISA and thread count (model
#               tests), the engine's K/V codes, scales and rings after decoding with every ISA
#               (official-state dumps)
#   cortex-a76  the Raspberry Pi 5's core (NEON + dotprod, no SVE / i8mm): ISA detection (dotprod),
#               the official-state dumps with every ISA, the session goldens on tiny (whole
#               turns: the engine's envelopes), and `needle verify --golden` on tiny and small
#               with --isa dotprod and --isa neon
#   cortex-a72  a core without SDOT (Raspberry Pi 4): detection must pick neon and refuse
#               --isa dotprod; verify --golden tiny with neon
# The kernel tests run on max only: they compare every table with the reference whatever the CPU
# model, and qemu emulates an instruction the same way on each model (a model only decides what
# HWCAP reports and which instructions are legal, which detection and verify check on each).
# Results on ARM must equal x86 bit for bit: the goldens are the same files. Also checked: the
# binary is AArch64, has the SDOT kernels, and libneedle.a has no fused multiply-add. Exit 0 only
# if every step passes; prints each step's elapsed seconds. Installs what it needs with
# `scripts/setup.sh --aarch64` (apt-get, as root or with sudo): the cross compiler, qemu-user and
# the arm64 runtime of fmt, spdlog and OpenMP (Debian multiarch); the host's header-only packages
# (CLI11, nlohmann-json, Catch2 v2) serve both builds.
set -euo pipefail
cd "$(dirname "$0")/.."
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
bash scripts/setup.sh --aarch64
echo "test-aarch64: $(aarch64-linux-gnu-g++ --version | head -1); $(qemu-aarch64 --version | head -1)"

step "cross build (needle, needle_tests) into $BUILD/"
GEN=()
if [ ! -f "$BUILD/CMakeCache.txt" ]; then GEN=(-G Ninja); fi
# Only the test files of the tags run below (the others would only cost build time here).
TEST_FILES="attention_i8;kernels_i8;kernels;libm;model;official_state;quant;report;session;vmath"
cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
  -DCMAKE_BUILD_TYPE=Release -DNEEDLE_WERROR=ON "-DNEEDLE_TEST_FILES=$TEST_FILES" >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target needle needle_tests
aarch64-linux-gnu-readelf -h "$BUILD/needle" | grep -c "AArch64" >/dev/null ||
  { echo "test-aarch64: not an AArch64 binary"; exit 1; }
# Nothing x86 in the ARM objects, and SDOT only in the dotprod files: the baseline build must run
# on any AArch64 CPU.
# (grep -c reads all of objdump's output: grep -q would stop early and, with pipefail, fail it.)
sdots=$(aarch64-linux-gnu-objdump -d "$BUILD/needle" | grep -c $'\tsdot\t' || true)
echo "test-aarch64: SDOT instructions in needle: $sdots"
if [ "$sdots" -eq 0 ]; then
  echo "test-aarch64: no SDOT in the binary (the dotprod kernels are missing)"
  exit 1
fi
aarch64-linux-gnu-nm -C "$BUILD/needle" | grep -c "CqGemmI8Dotprod" >/dev/null ||
  { echo "test-aarch64: SDOT without the dotprod kernels"; exit 1; }
# Bit-exact numerics: no fused multiply-add anywhere in the library (GCC contracts a * b + c by
# default on AArch64; the library is built with -ffp-contract=off).
fused=$(aarch64-linux-gnu-objdump -d "$BUILD/libneedle.a" | grep -cE $'\tf(mla|mls|madd|msub|nmadd|nmsub)\t' || true)
echo "test-aarch64: fused multiply-adds in libneedle.a: $fused"
[ "$fused" -eq 0 ] || exit 1

QEMU=(qemu-aarch64)
TESTS="$BUILD/tests/needle_tests"
# What runs where (qemu is ~10x slower than native; the subset keeps CI within its budget).
# Every table (scalar, neon, dotprod) is compared with the reference inside each test.
ENGINE='official numerics: every ISA and thread count gives the engine*'
STATE='official numerics: engine state identical with every ISA and 2 threads'
SPEC_MAX="[kernels],[quant],[libm],[report],$ENGINE,$STATE"
SPEC_MAX+=",*official numerics: the engine's first-step logits bit for bit"  # tiny and small
SPEC_MAX+=",envelope keys come in the engine*"
SPEC_A76="$STATE,session turns match the engine on tiny"
run_tests() {  # run_tests CPU SPEC: needle_tests under qemu; the summary, or the failures
  local log="$BUILD/needle_tests-$1.log"
  if ! QEMU_CPU=$1 "${QEMU[@]}" "$TESTS" "$2" --durations yes >"$log" 2>&1; then
    grep -v " s: " "$log" | tail -80
    echo "test-aarch64: needle_tests failed on -cpu $1 (whole log: $log)"
    return 1
  fi
  echo "-cpu $1: $(grep -E '^(All tests passed|test cases)' "$log")"
}
verify() {  # verify CPU ISA MODEL: needle verify --golden on a fixture model
  local cpu=$1 isa=$2 m=$3 out
  out=$(QEMU_CPU=$cpu "${QEMU[@]}" "$BUILD/needle" verify "tests/data/models/$m.cact" \
    --golden "tests/data/golden/$m/golden.json" --isa "$isa" -t 2) || true
  echo "$out" | grep -E "^isa|official [0-9]+:|^PASS|^FAIL" | sed "s/^/  [$cpu $isa $m] /"
  echo "$out" | grep -q "^isa *$isa " || { echo "test-aarch64: verify did not use $isa"; return 1; }
  echo "$out" | tail -1 | grep -qx PASS || { echo "test-aarch64: verify $m failed"; return 1; }
}
best_isa() {  # best_isa CPU: the table needle picks by itself on that CPU model
  QEMU_CPU=$1 "${QEMU[@]}" "$BUILD/needle" verify tests/data/models/tiny.cact -t 1 |
    awk '/^isa/{print $2}'
}
wait_all() {  # wait_all PID...: fails if any failed
  local rc=0 pid
  for pid in "$@"; do wait "$pid" || rc=1; done
  return $rc
}

step "ISA detection per CPU model (cortex-a72 has no SDOT)"
for cpu in max cortex-a76 cortex-a72; do
  best=$(best_isa "$cpu")
  want=dotprod
  [ "$cpu" = cortex-a72 ] && want=neon
  echo "test-aarch64: -cpu $cpu: best ISA $best (expected $want)"
  [ "$best" = "$want" ] || exit 1
done
if QEMU_CPU=cortex-a72 "${QEMU[@]}" "$BUILD/needle" verify tests/data/models/tiny.cact \
  --isa dotprod >/dev/null 2>&1; then
  echo "test-aarch64: --isa dotprod accepted on a CPU without SDOT"
  exit 1
fi

# Two qemu processes at a time (two cores): max's tests | the cortex-a76 tests, then verify.
step "needle_tests -cpu max (${SPEC_MAX}) | needle_tests -cpu cortex-a76 (${SPEC_A76}), \
needle verify --golden tiny, small (cortex-a76), tiny (cortex-a72)"
run_tests max "$SPEC_MAX" &
p1=$!
(run_tests cortex-a76 "$SPEC_A76" && verify cortex-a76 dotprod tiny &&
  verify cortex-a76 dotprod small && verify cortex-a76 neon tiny && verify cortex-a76 neon small &&
  verify cortex-a72 neon tiny) &
p2=$!
wait_all $p1 $p2

step "done"
echo "test-aarch64: all passed in $(($(date +%s) - START)) s"
